"""Deterministic tools of the bundled eval: a calculator, unit conversion, a small in-memory
weather service and country knowledge base, and read-only files of a fixture folder.

Loaded by ``miniagent eval --builtin`` like any ``--tools`` file: every module-level tool
counts, and ``says_yes`` is the ``python:says_yes`` answer check of one task.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any, TypeVar

from miniagent.core.errors import ToolError
from miniagent.core.tools.calculator import calculator
from miniagent.core.tools.tool import tool
from miniagent.core.tools.workspace import workspace_tools

__all__ = ["calculator", "convert_units", "count_file_lines", "country_facts", "list_files",
           "read_file", "says_yes", "weather"]

FIXTURES = Path(__file__).parent / "fixtures"
list_files, count_file_lines, read_file = workspace_tools(FIXTURES)

_WEATHER = {  # city: (°C, condition, humidity %)
    "paris": (18, "sunny", 55), "london": (14, "rain", 80), "tokyo": (22, "cloudy", 60),
    "new york": (20, "sunny", 45), "beijing": (25, "sunny", 30),
    "shanghai": (27, "rain", 85), "sydney": (16, "windy", 50), "berlin": (12, "cloudy", 70),
}
_CITY_ALIASES = {"巴黎": "paris", "伦敦": "london", "东京": "tokyo", "纽约": "new york",
                 "北京": "beijing", "上海": "shanghai", "悉尼": "sydney", "柏林": "berlin",
                 "nyc": "new york"}

_COUNTRIES = {  # country: (capital, population in millions, currency, language)
    "france": ("Paris", 68, "euro", "French"), "japan": ("Tokyo", 125, "yen", "Japanese"),
    "china": ("Beijing", 1412, "yuan (renminbi)", "Chinese"),
    "germany": ("Berlin", 84, "euro", "German"),
    "brazil": ("Brasília", 203, "real", "Portuguese"),
    "australia": ("Canberra", 26, "Australian dollar", "English"),
    "canada": ("Ottawa", 40, "Canadian dollar", "English and French"),
    "egypt": ("Cairo", 105, "Egyptian pound", "Arabic"),
}
_COUNTRY_ALIASES = {"法国": "france", "日本": "japan", "中国": "china", "德国": "germany",
                    "巴西": "brazil", "澳大利亚": "australia", "加拿大": "canada",
                    "埃及": "egypt"}


_Row = TypeVar("_Row", bound=tuple[Any, ...])


def _lookup(table: dict[str, _Row], name: str, aliases: dict[str, str], *, missing: str,
            known: str) -> _Row:
    """``table``'s row for ``name`` (any case and width, an alias, ``市`` or `` city`` after
    it); else a ToolError that lists the ``known`` names."""
    text = " ".join(unicodedata.normalize("NFKC", name).casefold().split()).strip(" .?")
    for suffix in ("市", " city"):
        text = text.removesuffix(suffix)
    found = table.get(aliases.get(text, text))
    if found is None:
        names = ", ".join(key.title() for key in table)
        raise ToolError(f"{missing} {name!r}. Known {known}: {names}.")
    return found


@tool(idempotent=True)
def weather(city: str) -> str:
    """Today's weather in a city: temperature in °C, condition and humidity.

    Args:
        city: the city name, e.g. 'Paris' or '北京'.
    """
    celsius, condition, humidity = _lookup(_WEATHER, city, _CITY_ALIASES,
                                           missing="No weather data for", known="cities")
    return f"{city}: {celsius} °C, {condition}, humidity {humidity}%"


@tool(idempotent=True)
def country_facts(country: str) -> str:
    """Facts about a country: its capital, population (millions), currency and language.

    Args:
        country: the country name, e.g. 'Japan' or '法国'.
    """
    capital, people, currency, language = _lookup(
        _COUNTRIES, country, _COUNTRY_ALIASES, missing="No facts about", known="countries")
    return (f"{country}: capital {capital}; population {people} million; currency {currency}; "
            f"language {language}")


_UNITS = {  # unit: (dimension, factor to the base unit)
    "m": ("length", 1.0), "km": ("length", 1000.0), "cm": ("length", 0.01),
    "mm": ("length", 0.001), "mi": ("length", 1609.344), "ft": ("length", 0.3048),
    "in": ("length", 0.0254), "kg": ("mass", 1.0), "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237), "oz": ("mass", 0.028349523125), "l": ("volume", 1.0),
    "ml": ("volume", 0.001), "gal": ("volume", 3.785411784),
}
_UNIT_ALIASES = {
    "meter": "m", "meters": "m", "metre": "m", "米": "m", "kilometer": "km",
    "kilometers": "km", "kilometre": "km", "公里": "km", "千米": "km", "centimeter": "cm",
    "厘米": "cm", "millimeter": "mm", "mile": "mi", "miles": "mi", "英里": "mi", "foot": "ft",
    "feet": "ft", "英尺": "ft", "inch": "in", "inches": "in", "英寸": "in", "kilogram": "kg",
    "kilograms": "kg", "公斤": "kg", "千克": "kg", "gram": "g", "grams": "g", "克": "g",
    "pound": "lb", "pounds": "lb", "lbs": "lb", "磅": "lb", "ounce": "oz", "ounces": "oz",
    "liter": "l", "liters": "l", "litre": "l", "升": "l", "milliliter": "ml", "毫升": "ml",
    "gallon": "gal", "gallons": "gal", "加仑": "gal",
    "celsius": "c", "°c": "c", "摄氏度": "c", "fahrenheit": "f", "°f": "f", "华氏度": "f",
    "kelvin": "k", "开尔文": "k",
}
_TO_KELVIN = {"c": lambda v: v + 273.15, "f": lambda v: (v - 32) * 5 / 9 + 273.15,
              "k": lambda v: v}
_FROM_KELVIN = {"c": lambda v: v - 273.15, "f": lambda v: (v - 273.15) * 9 / 5 + 32,
                "k": lambda v: v}


@tool(idempotent=True)
def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a quantity between units of length, mass, volume or temperature.

    Args:
        value: the number to convert.
        from_unit: the unit of value, e.g. 'km', 'mi', 'kg', 'lb', 'l', 'gal', 'C', 'F', 'K'.
        to_unit: the unit wanted, of the same kind.
    """
    source, target = _unit(from_unit), _unit(to_unit)
    if source in _TO_KELVIN or target in _TO_KELVIN:
        if not (source in _TO_KELVIN and target in _TO_KELVIN):
            raise ToolError(f"Cannot convert {from_unit!r} to {to_unit!r}: not both temperatures.")
        return round(_FROM_KELVIN[target](_TO_KELVIN[source](value)), 4)
    (kind_a, factor_a), (kind_b, factor_b) = _UNITS[source], _UNITS[target]
    if kind_a != kind_b:
        raise ToolError(f"Cannot convert {from_unit!r} ({kind_a}) to {to_unit!r} ({kind_b}).")
    return round(value * factor_a / factor_b, 4)


def _unit(name: str) -> str:
    text = unicodedata.normalize("NFKC", name).strip().casefold()
    text = _UNIT_ALIASES.get(text, text)
    if text in ("°c", "degc"):
        text = "c"
    if text not in _UNITS and text not in _TO_KELVIN:
        known = ", ".join([*_UNITS, "C", "F", "K"])
        raise ToolError(f"Unknown unit {name!r}. Known units: {known}.")
    return text


def says_yes(answer: str, expected: dict[str, object]) -> bool:
    """An answer check: the answer says yes (in English or Chinese) and not no."""
    text = unicodedata.normalize("NFKC", answer).casefold()
    yes = any(word in text for word in ("yes", "是的", "会", "在下雨"))
    no = any(word in text for word in ("no,", "no.", "not ", "没有", "不"))
    return yes and not no

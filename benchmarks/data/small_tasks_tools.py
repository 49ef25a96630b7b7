"""A user's own tools file for ``benchmarks/small_tasks.py``: fixed answers, so a task's
result says whether the model used the tool, not what the weather is."""

from __future__ import annotations

from miniagent import tool

_WEATHER = {"london": "light rain, 12 °C", "paris": "sunny, 24 °C", "oslo": "cloudy, 9 °C",
            "beijing": "sunny, 31 °C", "北京": "sunny, 31 °C"}
_RATES = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.926, ("GBP", "USD"): 1.27}
_PRICES = {"AAPL": 189.5, "MSFT": 411.2, "TSLA": 242.8}


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city: conditions (sunny, rain, ...) and temperature.

    Args:
        city: The city name, e.g. 'London'.
    """
    found = _WEATHER.get(city.strip().lower())
    if found is None:
        return f"no weather data for {city}; known cities: London, Paris, Oslo, Beijing"
    return f"{city}: {found}"


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency to another at today's rate.

    Args:
        amount: The amount to convert.
        from_currency: ISO code of the currency converted from, e.g. 'EUR'.
        to_currency: ISO code of the currency converted to, e.g. 'USD'.
    """
    rate = _RATES.get((from_currency.upper(), to_currency.upper()))
    if rate is None:
        return f"no rate for {from_currency} to {to_currency}"
    return f"{amount:g} {from_currency.upper()} = {amount * rate:.2f} {to_currency.upper()}"


@tool
def stock_price(ticker: str) -> str:
    """The latest price of a stock, in US dollars.

    Args:
        ticker: The stock's ticker symbol, e.g. 'AAPL'.
    """
    price = _PRICES.get(ticker.strip().upper())
    return f"{ticker.upper()}: {price} USD" if price is not None else f"unknown ticker {ticker}"

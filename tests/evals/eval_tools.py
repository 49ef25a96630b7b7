"""Tools of the eval tests: deterministic, like the bundled ones."""

from __future__ import annotations

from miniagent import tool
from miniagent.core.tools.tool import Tool

TEMPERATURES = {"paris": 18, "london": 14}


@tool
def weather(city: str) -> str:
    """Today's temperature in a city, in °C.

    Args:
        city: the city name.
    """
    return f"{city}: {TEMPERATURES[city.strip().lower()]} °C"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


double = Tool.from_schema(
    name="double", description="Double a number.",
    parameters={"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
    fn=lambda args: args["x"] * 2)


def ends_with_five(answer: str, expected: dict[str, object]) -> bool:
    """A python: answer check."""
    return answer.strip().endswith("5")

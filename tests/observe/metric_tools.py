"""Tools the metrics tests run: one that answers, one that always fails."""

from __future__ import annotations

from miniagent import tool


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return "sunny"


@tool
def broken(city: str) -> str:
    """A tool that always fails."""
    raise RuntimeError("service unavailable")

"""Checks of the numbers a developer configures: counts, seconds and other quantities.

A limit is only a limit when its number compares the way it reads. ``NaN`` compares false to
everything, so ``steps >= max_steps`` never holds and a run with ``max_steps=float("nan")``
goes on for ever; ``inf`` is no bound either, a negative count or delay has no meaning, and a
float where a count is meant (``max_steps=2.5``) hides a mistake. Each check here returns the
value when it is one that works and raises the caller's error class otherwise, with the name
of the setting and what it accepts.

Example:
    >>> whole("max_steps", 10, least=1)
    10
    >>> try:
    ...     seconds("timeout", float("nan"))
    ... except UserError as exc:
    ...     print(exc)
    timeout must be a positive number of seconds, got nan (NaN and infinity bound nothing)
"""

from __future__ import annotations

import math

from miniagent.core.errors import UserError

__all__ = ["quantity", "seconds", "whole"]


def whole(label: str, value: object, *, least: int, most: int | None = None,
          error: type[Exception] = UserError) -> int:
    """``value`` if it is an integer (not a bool) from ``least`` to ``most``; else ``error``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (
            most is not None and value > most):
        span = f"at least {least}" if most is None else f"from {least} to {most:,}"
        raise error(f"{label} must be {span}, got {value!r}{_note(value, whole=True)}")
    return value


def seconds(label: str, value: object, *, most: float | None = None,
            error: type[Exception] = UserError) -> float:
    """``value`` as a float if it is a finite number of seconds above 0 (at most ``most``)."""
    number = _finite(value)
    if number is None or not number > 0 or (most is not None and number > most):
        span = "" if most is None else f" up to {most:g}"
        raise error(f"{label} must be a positive number of seconds{span}, got {value!r}"
                    f"{_note(value)}")
    return number


def quantity(label: str, value: object, *, least: float, most: float | None = None,
             error: type[Exception] = UserError) -> float:
    """``value`` as a float if it is a finite number from ``least`` to ``most``."""
    number = _finite(value)
    if number is None or number < least or (most is not None and number > most):
        span = f"at least {least:g}" if most is None else f"from {least:g} to {most:g}"
        raise error(f"{label} must be a number {span}, got {value!r}{_note(value)}")
    return number


def _finite(value: object) -> float | None:
    """``value`` as a float if it is a finite int or float (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int past the float range
        return None
    return number if math.isfinite(number) else None


def _note(value: object, *, whole: bool = False) -> str:
    """Why a value that looks like a number is still refused."""
    if isinstance(value, float) and not math.isfinite(value):
        return " (NaN and infinity bound nothing)"
    if whole and isinstance(value, float):
        return " (a whole number)"
    return ""

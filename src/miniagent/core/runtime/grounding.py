"""Figures a call takes from nowhere: the ``ground_figures`` aid.

A small model writes a calculator expression with a figure it never fetched
(Qwen2.5-Coder-1.5B asked "How many °C warmer is Shanghai than Berlin?" called the weather
for Shanghai, then ``27 - 14``: Berlin's 14 was made up), or calls the calculator with
made-up figures before reading the file that holds them. Under ``ground_figures`` such a
call is not run: its observation names the figures that appear nowhere in what the model
was told (the instructions, the user's messages, the tool results so far) and asks it to
fetch them first.

A figure is grounded when a figure the model was told rounds to it at the precision it is
written with (``126`` from ``125.7``). Beside grounded figures, a call may use constants:
small whole numbers (0 to 10), powers of ten, halves and quarters and the factors of unit
conversions (``0.621`` from a mile's ``0.621371``, ``1.8``, ``273.15``). A call none of whose
figures was told may use only small whole numbers: ``1000 / 4`` for a quarter of a budget
not read yet is refused, ``2 + 2`` is not. The refusal comes once per set of ungrounded
figures in a turn: a model that writes the same figures again is let through (a figure may
be its own knowledge, or one the tools cannot give).

Example:
    >>> from miniagent.core.types import ToolCall
    >>> call = ToolCall(id="c1", name="calculator", arguments={"expression": "27 - 14"})
    >>> ungrounded_figures(call, ["Shanghai: 27 °C, sunny"])
    ('14',)
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from miniagent.core.types import Message, Step, ToolCall

__all__ = ["CONSTANTS", "NOT_RUN", "defaults_of", "refusal_reason", "to_refuse",
           "ungrounded_figures", "ungrounded_note"]

NOT_RUN = "ungrounded figures: not run"
"""The reason recorded on a call the aid answered (its moves say it was not run)."""

CONSTANTS = (0.5, 0.25, 0.75, 1.8, 32, 273.15, 459.67, 0.621371, 1.609344, 2.20462,
             0.453592, 3.28084, 0.3048, 2.54, 0.393701, 12, 16, 24, 60, 365, 3600, 1.0936,
             0.9144, 28.3495, 3.78541, 0.264172, math.pi, math.e)
"""Figures any call may use: unit-conversion factors and offsets (°F and °C, K, miles,
pounds, feet, inches, yards, ounces, gallons) and common counts (hours, minutes, days)."""

_SORTED_CONSTANTS = sorted(CONSTANTS)

# a figure as written: 1,234.5 or 27 or .5 (a sign is not part of it: "27 - 14")
_FIGURE = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])|(?<![\w\d])\.\d+")


def to_refuse(call: ToolCall, messages: Sequence[Message], turn_steps: Sequence[Step],
              told: Sequence[str]) -> tuple[str, ...]:
    """The ungrounded figures ``call`` is refused for (empty: it runs): the figures no text
    the model was told grounds (``told``: the instructions and the called tool's defaults,
    :func:`defaults_of`; the user's and system messages; the tool results other than these
    refusals), unless the turn refused them before."""
    refused: set[str] = set()
    reasons: set[str] = set()
    for step in turn_steps:
        for record in step.calls:
            for move in record.moves:
                if move.reason.startswith(NOT_RUN):
                    refused.add(record.call.id)
                    reasons.add(move.reason)
    told = list(told)
    told.extend(message.content or "" for message in messages
                if message.role in ("system", "user")
                or (message.role == "tool" and message.tool_call_id not in refused))
    figures = ungrounded_figures(call, told)
    return () if not figures or refusal_reason(figures) in reasons else figures


def defaults_of(parameters: Mapping[str, Any]) -> str:
    """The default values of a tool's parameters (its JSON Schema's top-level properties), as
    text: a model may copy them (``max_lines=200``). Its description is not told data: a
    sample expression in it (``(2 + 3) * sqrt(16) / 2``) was copied for a quarter of a
    budget not read yet."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    return " ".join(str(spec["default"]) for spec in properties.values()
                    if isinstance(spec, Mapping) and "default" in spec)


def ungrounded_figures(call: ToolCall, told: Iterable[str]) -> tuple[str, ...]:
    """The figures of ``call``'s arguments (numbers, and figures written in strings) that no
    text of ``told`` grounds and that are no common constant, as written, in order, once
    each."""
    written = list(dict.fromkeys(_figures_in_arguments(call.arguments)))
    known = sorted({value for text in told for value in _values(_FIGURE.findall(text))})
    if any(_grounded(figure, known) for figure in written):
        return tuple(f for f in written if not _grounded(f, known) and not _constant(f))
    # none was told: a constant does not make a call of its own figures ("1000 / 4" for a
    # quarter of a budget not yet read); small whole numbers stay free ("2 + 2")
    return tuple(f for f in written if not _small(f))


def ungrounded_note(call: ToolCall, figures: Sequence[str]) -> str:
    """The observation of a call not run for ``figures``."""
    listed = ", ".join(figures)
    which = "figure" if len(figures) == 1 else "figures"
    verb = "appears" if len(figures) == 1 else "appear"
    return (f"The call of '{call.name}' was not run: the {which} {listed} {verb} nowhere in "
            "the question or the results so far. Fetch each figure with a tool first (or take "
            "it from an Observation); if it is right as it is, make the same call again.")


def refusal_reason(figures: Sequence[str]) -> str:
    """The reason recorded on a refused call: the same figures give the same reason, so a
    second refusal of them in a turn is recognised (and not made)."""
    return f"{NOT_RUN} ({', '.join(figures)})"


def _figures_in_arguments(arguments: Any) -> list[str]:
    """Every figure in ``arguments``, as written, depth first in order."""
    found: list[str] = []
    stack = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            found.append(_written(value))
        elif isinstance(value, str):
            found.extend(_FIGURE.findall(value))
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return found


def _written(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(abs(value)) if math.isfinite(value) else str(value)


def _values(figures: Iterable[str]) -> list[float]:
    values = []
    for figure in figures:
        try:
            values.append(abs(float(figure.replace(",", ""))))
        except ValueError:
            continue
    return values


def _grounded(figure: str, known: Sequence[float]) -> bool:
    """Whether a ``known`` value (sorted) rounds to ``figure`` at the precision it is written
    with."""
    exact = _decimal(figure)
    if exact is None:
        return True  # not a figure after all
    value = float(exact)
    if value == math.inf:
        return False  # beyond a float (400 digits): nothing told rounds to it
    exponent = exact.as_tuple().exponent
    decimals = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    reach = 0.5 * 10.0 ** -decimals + 1e-9 * max(1.0, value)
    at = bisect.bisect_left(known, value - reach)  # ``known`` is sorted: one search a figure
    return at < len(known) and known[at] <= value + reach


def _small(figure: str) -> bool:
    """A whole number from 0 to 10 (or no figure at all)."""
    exact = _decimal(figure)
    return exact is None or (exact == exact.to_integral_value() and exact <= 10)


def _constant(figure: str) -> bool:
    """A small whole number, a power of ten, or a common constant (:data:`CONSTANTS`)."""
    exact = _decimal(figure)
    return (_small(figure) or exact is None or _power_of_ten(float(exact))
            or _grounded(figure, _SORTED_CONSTANTS))


def _decimal(figure: str) -> Decimal | None:
    try:
        exact = Decimal(figure.replace(",", "")).copy_abs()
    except InvalidOperation:
        return None
    return exact if exact.is_finite() else None


def _power_of_ten(value: float) -> bool:
    if not 0 < value < math.inf:  # a figure of 400 digits is a float's infinity
        return False
    exponent = math.log10(value)
    return abs(exponent - round(exponent)) < 1e-9

"""Eval tasks: one JSON object per line of a JSONL file, validated with clear errors.

The shape (other keys are allowed and kept in ``extra``)::

    {"id": "w1", "input": "Weather in Paris?",
     "expected": {"answer": "18", "check": "number", "tolerance": 0.5},
     "expected_calls": [{"name": "weather", "arguments": {"city": "Paris"}}],
     "calls_match": "order", "category": "one_tool", "tags": ["weather"]}

``expected_calls``, ``calls_match`` (``order`` by default, or ``set``), ``category``,
``tags`` and ``tolerance`` are optional.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from miniagent.core.errors import UserError

CHECKS = ("exact", "number", "regex", "contains", "one_of")
"""The built-in answer checks; ``python:NAME`` names a function of the tools file."""

Finite = Annotated[float, Field(allow_inf_nan=False)]
"""A number JSON can hold: a NaN or infinite answer would make every report invalid JSON."""


class Expected(BaseModel):
    """What a correct final answer looks like."""

    model_config = ConfigDict(extra="allow")

    answer: str | int | Finite | list[str | int | Finite]
    check: str = "exact"
    tolerance: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @field_validator("check")
    @classmethod
    def _known_check(cls, value: str) -> str:
        if value in CHECKS or re.fullmatch(r"python:[A-Za-z_][A-Za-z0-9_]*", value):
            return value
        raise ValueError(f"check must be one of {', '.join(CHECKS)} or python:NAME, "
                         f"got {value!r}")


class ExpectedCall(BaseModel):
    """A tool call the task expects, with the arguments it should carry."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | None = None
    """None (left out): any valid arguments match."""


class EvalTask(BaseModel):
    """One task of an eval set."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    input: str = Field(min_length=1)
    expected: Expected
    expected_calls: list[ExpectedCall] | None = None
    calls_match: Literal["order", "set"] = "order"
    category: str = "default"
    tags: list[str] = Field(default_factory=list)


def parse_tasks(lines: list[str], source: str) -> list[EvalTask]:
    """Tasks from JSONL lines; blank lines and ``#`` comments are skipped.

    Raises:
        UserError: a line is not JSON or not a valid task, or two tasks share an id; the
            message names the file and line.
    """
    tasks: list[EvalTask] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            data = json.loads(text)
            bad = _non_finite(data)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise UserError(f"{where}: not a JSON object ({exc})") from None
        name = f" {data['id']!r}" if isinstance(data, dict) and isinstance(
            data.get("id"), str) else ""
        if bad is not None:
            raise UserError(f"{where}: task{name}: {bad} is not a finite number; JSON has no "
                            "NaN or Infinity (write the number, or the text in quotes)")
        try:
            task = EvalTask.model_validate(data)
        except ValidationError as exc:
            raise UserError(f"{where}: not a valid task: {_first_problem(exc)}") from None
        if task.id in seen:
            raise UserError(f"{where}: task id {task.id!r} was already used on line "
                            f"{seen[task.id]}")
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise UserError(f"{source}: no tasks found")
    return tasks


def load_tasks(path: str | Path) -> list[EvalTask]:
    """The tasks of a JSONL file (UTF-8). Raises UserError with the file and line."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read tasks file {file}: {exc}") from None
    return parse_tasks(text.splitlines(), str(file))


def _non_finite(value: Any, where: str = "") -> str | None:
    """Where in ``value`` a NaN or infinity is (Python's JSON reads ``NaN``, ``Infinity``
    and ``1e999`` as such), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'the task'} ({value})"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(
        value, list) else ()
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "task"
    return f"{where}: {error['msg']}" + (f" (and {exc.error_count() - 1} more)"
                                         if exc.error_count() > 1 else "")

"""What changed between two eval reports (``--compare OLD.json``), task run by task run.

The earlier report is a file the user names, maybe edited or from another tool: it is checked
when the command starts (:func:`load_report`), so a report of the wrong shape is a one-line
error before anything runs, not a traceback after the whole eval.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from miniagent.core.errors import UserError

_TRACKED = ("accuracy", "tool_call_accuracy", "call_validity", "parse_failure_rate",
            "self_repair_rate")

Metric = Annotated[float | None, Field(allow_inf_nan=False)]


class _Group(BaseModel):
    """The metrics of a group of runs that a comparison reads (others are kept as they are)."""

    model_config = ConfigDict(extra="allow")

    accuracy: Metric = None
    tool_call_accuracy: Metric = None
    call_validity: Metric = None
    parse_failure_rate: Metric = None
    self_repair_rate: Metric = None


class _Result(BaseModel):
    """One task run of the earlier report, as far as a comparison reads it."""

    model_config = ConfigDict(extra="allow")

    key: str | None = None
    id: str | None = None
    mode: str | None = None
    repeat: int | None = None
    correct: bool = False
    status: str | None = None
    tool_calls_correct: bool | None = None
    steps: int | None = None
    final_answer: str | None = None

    @model_validator(mode="after")
    def _has_key(self) -> _Result:
        if not self.key:  # a report of an older miniagent: the key is made of its parts
            if self.id is None:
                raise ValueError("a result needs a 'key' or an 'id'")
            self.key = f"{self.mode}/{self.repeat}/{self.id}"
        return self


class _Report(_Group):
    results: list[_Result]
    by_mode: dict[str, _Group] = Field(default_factory=dict)
    by_category: dict[str, _Group] = Field(default_factory=dict)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: JSON has no infinity, Python reads it as one
        raise ValueError(f"the number {text} is too large")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def load_report(path: str | Path) -> dict[str, Any]:
    """A report written by ``miniagent eval --json``, checked for what :func:`compare` reads.

    Raises:
        UserError: the file cannot be read, is not JSON (``NaN`` and ``Infinity`` are not),
            or is not an eval report; the message names the file and the first problem.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"), parse_float=_finite,
                          parse_constant=_no_constant)
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"cannot read the report to compare with, {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UserError(f"{path} is not an eval report (no 'results' list); write one with "
                        "miniagent eval ... --json > FILE")
    try:
        return _Report.model_validate(data).model_dump()
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise UserError(f"{path} is not an eval report: {where}: {error['msg']}") from None


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Metric deltas (overall, per mode, per category) and every task run whose outcome moved."""
    before = {r.get("key") or f"{r.get('mode')}/{r.get('repeat')}/{r['id']}": r
              for r in old["results"]}
    after = {r["key"]: r for r in new["results"]}
    changed = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        if bool(a.get("correct")) != bool(b["correct"]) or a.get("status") != b["status"] \
                or a.get("tool_calls_correct") != b["tool_calls_correct"]:
            changed.append({
                "key": key, "id": b["id"], "mode": b["mode"],
                "correct": [bool(a.get("correct")), bool(b["correct"])],
                "tool_calls_correct": [a.get("tool_calls_correct"), b["tool_calls_correct"]],
                "status": [a.get("status"), b["status"]],
                "steps": [a.get("steps"), b["steps"]],
                "final_answer": [a.get("final_answer"), b["final_answer"]],
            })
    return {
        "overall": _deltas(old, new),
        "by_mode": {m: _deltas(old.get("by_mode", {}).get(m, {}), g)
                    for m, g in new.get("by_mode", {}).items()},
        "by_category": {c: _deltas(old.get("by_category", {}).get(c, {}), g)
                        for c, g in new.get("by_category", {}).items()},
        "fixed": sum(1 for c in changed if c["correct"] == [False, True]),
        "broken": sum(1 for c in changed if c["correct"] == [True, False]),
        "changed": changed,
        "only_before": sorted(before.keys() - after.keys()),
        "only_after": sorted(after.keys() - before.keys()),
    }


def _deltas(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _TRACKED:
        a, b = old.get(name), new.get(name)
        out[name] = {"before": a, "after": b,
                     "delta": round(b - a, 4) if a is not None and b is not None else None}
    return out

"""What changed between two eval reports (``--compare OLD.json``), task run by task run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from miniagent.errors import UserError

_TRACKED = ("accuracy", "tool_call_accuracy", "call_validity", "parse_failure_rate",
            "self_repair_rate")


def load_report(path: str | Path) -> dict[str, Any]:
    """A report written by ``miniagent eval --json``; UserError when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the report to compare with, {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UserError(f"{path} is not an eval report (no 'results' list); write one with "
                        "miniagent eval ... --json > FILE")
    return data


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

"""Metrics of an eval, overall, per mode and per category, each with its ``n``.

- ``accuracy``: runs whose final answer passed the task's check / runs.
- ``tool_call_accuracy``: among runs of tasks that expect calls, those whose valid calls were
  the expected ones (see :mod:`miniagent.evals.calls`); ``None`` when no task expects calls.
- ``call_validity``: calls of registered tools with arguments that validated / calls made.
- ``steps``: model calls per run: mean and distribution (``{"steps": runs}``).
- ``parse_failure_rate``: model replies that were neither an action nor an answer / replies.
- ``self_repair_rate``: among runs that met a tool error or a format error, those that still
  ended with a correct answer.
- ``tokens``: prompt, completion and cached tokens per run (mean) and in total, of the runs
  whose server reported them; ``unreported`` counts the others (a mean of none is None).
- ``wall_time``: seconds per run (mean, median, max) and in total.
- ``statuses``: how runs ended (``completed``, ``max_steps``, ``error``, ...).
- ``faults``: what was injected (tool failures) apart from what the runs met (tool errors of
  any cause, parse failures, runs ended by a model error).
- ``spread`` (with ``--repeat``): accuracy of each repeat, its mean, min, max and stdev.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report: overall metrics, ``by_mode``, ``by_category``, and every result."""
    modes = list(dict.fromkeys(r["mode"] for r in results))
    report: dict[str, Any] = {
        "tasks": len({r["id"] for r in results}),
        "runs": len(results),
        "modes": modes,
        **metrics(results),
        "by_category": by_category(results),
        "by_mode": {mode: {**metrics(runs), "by_category": by_category(runs)}
                    for mode in modes for runs in [[r for r in results if r["mode"] == mode]]},
        "results": list(results),
    }
    return report


def by_category(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    categories = sorted({r["category"] for r in results})
    return {c: metrics([r for r in results if r["category"] == c]) for c in categories}


def metrics(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every metric of a group of runs (see the module docstring)."""
    n = len(runs)
    judged = [r["tool_calls_correct"] for r in runs if r["tool_calls_correct"] is not None]
    made = sum(r["calls_made"] for r in runs)
    replies = sum(r["steps"] for r in runs)
    met = [r for r in runs if r["met_error"]]
    return {
        "n": n,
        "accuracy": _ratio(sum(bool(r["correct"]) for r in runs), n),
        "tool_call_accuracy": _ratio(sum(judged), len(judged)),
        "tool_call_n": len(judged),
        "call_validity": _ratio(made - sum(r["invalid_calls"] for r in runs), made),
        "calls_made": made,
        "steps": _steps(runs),
        "parse_failure_rate": _ratio(sum(r["parse_failures"] for r in runs), replies),
        "self_repair_rate": _ratio(sum(bool(r["self_repaired"]) for r in met), len(met)),
        "met_error_n": len(met),
        "tokens": _tokens(runs),
        "wall_time": _wall(runs),
        "statuses": dict(Counter(r["status"] for r in runs).most_common()),
        "faults": _faults(runs),
        "spread": _spread(runs),
    }


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _steps(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    counts = [r["steps"] for r in runs]
    return {"mean": round(statistics.fmean(counts), 3) if counts else None,
            "distribution": {str(k): v for k, v in sorted(Counter(counts).items())}}


def _tokens(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    reported = [r["tokens"] for r in runs if r["tokens"]["prompt"] is not None]
    out: dict[str, Any] = {"unreported": len(runs) - len(reported)}
    for kind in ("prompt", "completion", "cached"):
        values = [t[kind] or 0 for t in reported]
        out[kind] = round(statistics.fmean(values), 1) if values else None
        out[f"{kind}_total"] = sum(values)
    return out


def mean_tokens(tokens: dict[str, Any], kind: str) -> str:
    """A group's mean ``kind`` tokens per run in words: ``n/a`` when no run's server reported
    them, and how many runs it did not report for."""
    mean = "n/a" if tokens[kind] is None else f"{tokens[kind]:,.0f}"
    unreported = tokens.get("unreported", 0)
    return f"{mean} ({unreported} not reported)" if unreported else mean


def _wall(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    times = [r["wall_time"] for r in runs]
    if not times:
        return {"mean": None, "median": None, "max": None, "total": 0.0}
    return {"mean": round(statistics.fmean(times), 3),
            "median": round(statistics.median(times), 3),
            "max": round(max(times), 3), "total": round(sum(times), 3)}


def _faults(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    injected = [r.get("faults_injected") or {} for r in runs]
    return {
        "injected": {"tool_failures": sum(i.get("tool_failures", 0) for i in injected),
                     "tool_calls_seen": sum(i.get("tool_calls_seen", 0) for i in injected)},
        "met": {"tool_errors": sum(r["tool_errors"] for r in runs),
                "parse_failures": sum(r["parse_failures"] for r in runs),
                "model_errors": sum(r["status"] == "error" for r in runs),
                "runs_with_errors": sum(bool(r["met_error"]) for r in runs)},
    }


def _spread(runs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    repeats = sorted({r["repeat"] for r in runs})
    if len(repeats) < 2:
        return None
    per = [statistics.fmean(bool(r["correct"]) for r in runs if r["repeat"] == k)
           for k in repeats]
    return {"accuracy_by_repeat": [round(a, 4) for a in per],
            "mean": round(statistics.fmean(per), 4), "min": round(min(per), 4),
            "max": round(max(per), 4), "stdev": round(statistics.pstdev(per), 4)}

"""Eval reports in the inbox: the folders ``miniagent eval --out`` wrote, under one folder
(``miniagent ui --evals DIR``), rendered by the code that writes ``eval --html`` files
(:func:`~miniagent.report.evals.render`) and their traces by the code of ``trace html``.

Nothing a request says is used as a path: a report is chosen by its name in the listing (a
folder holding ``report.json``, at most two levels below ``DIR``, never through a link that
leads out), a trace by the key of a result in that report, whose ``trace`` field must name a
``.jsonl`` file inside the report's folder (:func:`~miniagent.report.evals.confined`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miniagent.core.errors import UserError
from miniagent.observe.reader import read_trace
from miniagent.report.evals import TraceRefused, confined, render
from miniagent.report.trace import render_trace

REPORT = "report.json"
"""The file an eval folder holds its summary in (``miniagent eval --out DIR``)."""

MAX_LISTED = 500
"""At most this many eval folders are listed (the newest)."""

MAX_REPORT_BYTES = 64 * 1024 * 1024
"""A larger ``report.json`` is refused rather than read."""


@dataclass(frozen=True, kw_only=True)
class EvalRun:
    """One eval folder: its name in the listing (its path below the root, ``.`` for the root
    itself), where it is, and when its report was written."""

    name: str
    folder: Path
    written: float


def listed(root: Path) -> list[EvalRun]:
    """The eval folders under ``root``, newest first."""
    home = root.resolve()
    found: dict[str, EvalRun] = {}
    for pattern in (REPORT, f"*/{REPORT}", f"*/*/{REPORT}"):
        for path in home.glob(pattern):
            try:
                real = path.resolve()
                if not real.is_relative_to(home) or not real.is_file():
                    continue  # a link that leads out of the folder, or not a file
                written = real.stat().st_mtime
            except (OSError, RuntimeError):
                continue
            name = path.parent.relative_to(home).as_posix()
            found[name] = EvalRun(name=name, folder=path.parent, written=written)
    runs = sorted(found.values(), key=lambda r: (-r.written, r.name))
    return runs[:MAX_LISTED]


def find(root: Path, name: str) -> EvalRun | None:
    """The listed eval folder called ``name`` (None: no such one)."""
    return next((run for run in listed(root) if run.name == name), None)


def load_report(run: EvalRun) -> dict[str, Any]:
    """The folder's ``report.json``.

    Raises:
        UserError: it is too large, not JSON, or not an eval report.
    """
    path = run.folder / REPORT
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            raise UserError(f"{run.name}/{REPORT} is larger than {MAX_REPORT_BYTES:,} bytes")
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{run.name}/{REPORT} cannot be read: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("results"), list) or not all(
            isinstance(r, dict) and isinstance(r.get("key"), str) for r in report["results"]):
        raise UserError(f"{run.name}/{REPORT} is not a miniagent eval report")
    return report


def report_html(run: EvalRun, trace_url: Callable[[str], str]) -> str:
    """The report's page; ``trace_url(key)`` is the inbox's URL of a result's trace page."""
    report = load_report(run)

    def link(result: dict[str, Any]) -> str | None:
        return trace_url(result["key"]) if confined(result.get("trace"), run.folder) else None

    try:
        return render(report, trace_link=link)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{run.name}/{REPORT} is not a report this miniagent can show "
                        f"({type(exc).__name__}: {exc})") from None


def trace_html(run: EvalRun, key: str, *, back: tuple[str, str] | None = None) -> str | None:
    """The trace page of the report's result ``key`` (None: no such result, or no trace);
    ``back`` is its link to the report (see :func:`~miniagent.report.trace.render_trace`).

    Raises:
        UserError: the result's trace is refused (outside the folder, not JSONL) or unreadable.
    """
    result = next((r for r in load_report(run)["results"] if r["key"] == key), None)
    if result is None:
        return None
    try:
        jsonl = confined(result.get("trace"), run.folder)
    except TraceRefused as refused:
        raise UserError(f"the trace of {key} is refused: {refused}") from None
    return render_trace(read_trace(jsonl), back=back) if jsonl is not None else None

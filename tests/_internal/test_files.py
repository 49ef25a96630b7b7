"""Every file miniagent writes holds a transcript, so each is private (0600, folders 0700),
whatever the umask: traces, their HTML, eval results, configs and reports, sessions."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from miniagent import Agent, ScriptedModel, SQLiteStore
from miniagent.core.trace.jsonl import JsonlTracer
from miniagent.evals.results import ResultsFile
from miniagent.report.trace import write_trace_html


@pytest.fixture(autouse=True)
def _open_umask() -> Iterator[None]:
    old = os.umask(0o022)  # what most shells have: files 0644 unless made private
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_traces_reports_results_and_sessions_are_private(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    store = SQLiteStore(tmp_path / "sessions.db")
    Agent(model=ScriptedModel(["Final Answer: hi"]), trace=trace, store=store).run("hello")
    write_trace_html(trace, tmp_path / "run.html")
    results = ResultsFile(tmp_path / "eval" / "out")
    results.open({"model": "m"})
    results.append({"key": "native/1/t1", "ok": True})
    for path in (trace, tmp_path / "run.html", tmp_path / "sessions.db", results.path,
                 results.folder / "config.json"):
        assert mode(path) == 0o600, path
    for folder in (tmp_path / "eval", results.folder, results.folder / "traces"):
        assert mode(folder) == 0o700, folder


def test_a_trace_written_before_is_made_private(tmp_path: Path) -> None:
    trace = tmp_path / "old.jsonl"
    trace.write_text("", encoding="utf-8")
    assert mode(trace) == 0o644
    JsonlTracer(trace).close()
    assert mode(trace) == 0o600

"""A session's trace report, from the JSONL trace the runs wrote, by the code that writes
``miniagent trace html`` files (:func:`~miniagent.report.trace_html.render_trace`)."""

from __future__ import annotations

import threading
from pathlib import Path

from miniagent.errors import UserError
from miniagent.observe.reader import Trace, read_trace
from miniagent.report.trace_html import render_trace

_cache: dict[Path, tuple[tuple[int, int], Trace]] = {}
_lock = threading.Lock()


def _trace(path: Path) -> Trace | None:
    """The trace file read, once per version of it (its size and modification time)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    key = (stat.st_mtime_ns, stat.st_size)
    with _lock:
        cached = _cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
    try:
        trace = read_trace(path)
    except UserError:  # empty, too large, or no trace record yet
        return None
    with _lock:
        _cache.clear()  # one file per server: keep only its latest reading
        _cache[path] = (key, trace)
    return trace


def has_runs(path: Path, session_id: str) -> bool:
    """Whether the trace file holds a run of the session."""
    trace = _trace(path)
    return trace is not None and any(r.session_id == session_id for r in trace.runs)


def session_report(path: Path, session_id: str) -> str | None:
    """The trace report of the session's runs in the file (None: it holds none)."""
    trace = _trace(path)
    if trace is None:
        return None
    runs = [r for r in trace.runs if r.session_id == session_id]
    if not runs:
        return None
    return render_trace(Trace(path=trace.path, runs=runs, skipped=[]))

"""A session's trace report, from the JSONL trace the runs wrote, by the code that writes
``miniagent trace html`` files (:func:`~miniagent.report.trace.render_trace`).

The file is followed (:class:`~miniagent.observe.reader.TraceFollower`): each look reads only
what the runs appended since the last one, so a session's page costs the same however large
the trace has grown. Callers run these functions off the event loop.
"""

from __future__ import annotations

import threading
from pathlib import Path

from miniagent.core.errors import UserError
from miniagent.observe.reader import Trace, TraceFollower
from miniagent.report.trace import render_trace

_followers: dict[Path, TraceFollower] = {}
_lock = threading.Lock()  # one reader of a follower at a time, and no reading while rendering


def _follower(path: Path) -> TraceFollower:
    """The follower of ``path`` (one file per server: the others are dropped). Holds _lock."""
    found = _followers.get(path)
    if found is None:
        _followers.clear()
        found = _followers[path] = TraceFollower(path)
    return found


def _trace(path: Path) -> Trace | None:
    """The trace file as far as it is written (None: unreadable, too large). Holds _lock."""
    try:
        return _follower(path).read()
    except UserError:
        return None


def has_runs(path: Path, session_id: str) -> bool:
    """Whether the trace file holds a run of the session."""
    with _lock:
        trace = _trace(path)
        return trace is not None and any(r.session_id == session_id for r in trace.runs)


def session_report(path: Path, session_id: str, *,
                   back: tuple[str, str] | None = None) -> str | None:
    """The trace report of the session's runs in the file (None: it holds none); ``back``
    is the report's link to where it was opened from (see :func:`render_trace`)."""
    with _lock:
        trace = _trace(path)
        runs = [r for r in trace.runs if r.session_id == session_id] if trace else []
        if not runs:
            return None
        return render_trace(Trace(path=trace.path if trace else path, runs=runs, skipped=[]),
                            back=back)

"""What a worker serves, by task queue: its toolbox, its model's profile, and who counts the
events of the workflows it runs (its metrics).

A worker (:func:`~miniagent.temporal.worker.session_worker`) lists its tool sources once when it
starts and registers the result here under its task queue. The session workflow runs in that
same worker process, so it reads its tools here (:func:`served`) instead of asking for them in
an activity: what the model is offered, and approvals judged by the tools' own rules,
predicates included, where the tools live. A workflow replayed on another worker of the same
task queue reads that worker's registration, which serves the same tools.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from miniagent.core.errors import UserError
from miniagent.core.tools.toolbox import Toolbox

__all__ = ["Served", "register", "served", "unregister"]


@dataclass(frozen=True)
class Served:
    """One worker's tools, the profile of its model, and its metrics' workflow hook."""

    tools: Toolbox
    tool_mode: str = "auto"
    native_tools: bool | None = None
    observe: Callable[[Any], None] | None = None
    """Told each event the workflows of this worker emit, replays left out
    (:meth:`~miniagent.observe.metrics.Metrics.workflow_event`)."""


_SERVED: dict[str, Served] = {}
_LOCK = threading.Lock()


def register(task_queue: str, what: Served) -> None:
    with _LOCK:
        _SERVED[task_queue] = what


def unregister(task_queue: str, what: Served) -> None:
    with _LOCK:
        if _SERVED.get(task_queue) is what:
            del _SERVED[task_queue]


def served(task_queue: str) -> Served:
    """What this process's worker of ``task_queue`` serves.

    Raises:
        UserError: no worker of this process serves it (the workflow was registered on a
            worker built without :func:`~miniagent.temporal.worker.session_worker`).
    """
    found = _SERVED.get(task_queue)
    if found is None:
        raise UserError(f"no miniagent worker in this process serves task queue {task_queue!r}:"
                        " build workers with miniagent.temporal.session_worker")
    return found

"""The cyclic garbage collector while many runs are in flight in one process.

Each in-flight run keeps a few hundred objects alive across its awaits (its session, the
request being answered, futures, coroutine frames). With thousands of runs interleaved, nearly
every such object outlives the young generations and is promoted, so the collector's full
passes, each over every live object, come ever more often: measured with
``benchmarks/overhead.py``, 10,000 concurrent 3-step runs spent half their CPU time in it.

While at least :data:`BUSY` runs are in flight, :class:`RunLoad` raises the collector's
first threshold to :data:`YOUNG` allocations (fewer, larger young collections: transient
objects die before they are examined, and far fewer are promoted); once fewer than half of
that are left, it puts the threshold back. Nothing is freed later except garbage in reference
cycles, which runs rarely make. It leaves the collector alone when the collector is disabled,
when the first threshold is already :data:`YOUNG` or more, and when someone changed it in the
meantime; set :data:`enabled` to False to leave it alone always.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BUSY", "YOUNG", "RunLoad", "enabled", "load"]

BUSY = 200
"""Runs in flight in this process from which the collector's first threshold is raised."""

YOUNG = 50_000
"""The collector's first threshold (allocations between young collections) while busy."""

enabled = True
"""Whether :class:`RunLoad` may tune the collector at all (module-wide switch)."""


class RunLoad:
    """Counts the runs in flight and tunes the collector past :data:`BUSY` of them."""

    def __init__(self) -> None:
        self.runs = 0
        self._saved: tuple[int, int, int] | None = None  # the thresholds we replaced
        self._lock = threading.Lock()

    @contextmanager
    def run(self) -> Iterator[None]:
        """Count one run in flight for the duration of the block."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    def _enter(self) -> None:
        with self._lock:
            self.runs += 1
            if self.runs < BUSY or self._saved is not None or not enabled:
                return
            current = gc.get_threshold()
            if gc.isenabled() and 0 < current[0] < YOUNG:
                self._saved = current
                gc.set_threshold(YOUNG, *current[1:])

    def _leave(self) -> None:
        with self._lock:
            self.runs -= 1
            if self._saved is None or self.runs >= BUSY // 2:
                return
            saved, self._saved = self._saved, None
            if gc.get_threshold() == (YOUNG, *saved[1:]):  # unless someone changed it since
                gc.set_threshold(*saved)


load = RunLoad()
"""The process's one count of in-flight runs (every in-process run enters it)."""

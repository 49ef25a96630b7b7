"""Results of tool calls that arrive after their run stopped waiting (the in-process driver).

A sync tool runs on a worker thread, which nothing can stop: when its run is cancelled (Ctrl-C
in ``miniagent chat``, a task cancelled) or hits its deadline, the call goes on, and may still
pay, send or delete. Dropping its result would leave the call ``started``: a resume would call
its outcome unknown and offer to run it again. So the driver keeps the session's lease while
such a call is in flight; when its result has come (the source tells
:data:`~miniagent.core.tools.registry.late_result`) and the run has made its last save (which still
shows the call ``started``), it is written to the call's record, ``completed``, and then the
lease is given back. Work that is not on a thread (an async tool, an MCP server) stops with
its run: nothing is kept for it. A resume meanwhile is refused as busy; a call that never
returns holds the lease until this process ends (its outcome is then unknown, truly, and a
resume asks a person).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from miniagent.core.runtime import incoming
from miniagent.core.runtime.calls import record_late
from miniagent.core.session import AgentSession
from miniagent.core.store.base import CheckpointStore
from miniagent.core.types import Observation

__all__ = ["Arrival", "LateCalls"]

log = logging.getLogger("miniagent")


@dataclass(kw_only=True)
class Arrival:
    """One call's work on worker threads, as the source tells it
    (:class:`~miniagent.core.tools.registry.LateResult`), and whether its run stopped waiting."""

    calls: LateCalls
    call_id: str
    running: int = 0
    """Threads of this call under way."""
    outcome: Observation | None = None
    """What the last thread returned."""
    abandoned: bool = False

    def start(self) -> None:
        with self.calls.lock:
            self.running += 1

    def finish(self, outcome: Observation | None) -> None:
        """A thread returned (on that thread): recorded if the run stopped waiting."""
        with self.calls.lock:
            self.running -= 1
            if outcome is not None:
                self.outcome = outcome
            if not self.abandoned or self.running:
                return
        self.calls.landed(self)


class LateCalls:
    """The calls of one run left in flight when it stopped waiting (cancelled, or past its
    deadline), and the lease they hold.

    A result is recorded only once the run has made its last write (:meth:`release_when_settled`):
    the run's last save, of its own copy of the session, would write the call back ``started``.

    Args:
        store: The run's store.
        session_id: The run's session.
        owner: The run's lease owner.
        max_chars: The run's ``max_observation_chars``.
    """

    def __init__(self, store: CheckpointStore, session_id: str, owner: str, *,
                 max_chars: int, clock: Callable[[], float] = time.time) -> None:
        self.store, self.session_id, self.owner = store, session_id, owner
        self.max_chars, self.clock = max_chars, clock
        self.lock = threading.Lock()
        self._waiting: list[Arrival] = []  # abandoned calls not recorded yet
        self._recording = 0  # results being written now
        self._run_over = False
        self._release: Callable[[], None] | None = None

    def expect(self, call_id: str) -> Arrival:
        """What the source tells about the work of ``call_id`` (set as its ``late_result``)."""
        return Arrival(calls=self, call_id=call_id)

    def abandon(self, arrival: Arrival) -> None:
        """The run stopped waiting for this call: a result it has, or that its thread still
        brings, is recorded once the run is over (the lease is kept until then)."""
        with self.lock:
            arrival.abandoned = True
            self._waiting.append(arrival)
        self._settle()

    def landed(self, arrival: Arrival) -> None:
        """The last thread of an abandoned call returned (on that thread)."""
        try:
            self._settle()
        except Exception as exc:  # nobody above this thread would hear of it
            log.warning("the lease of session %s could not be given back after a late result "
                        "(%s: %s); it expires by itself", self.session_id,
                        type(exc).__name__, exc)

    def release_when_settled(self, release: Callable[[], None]) -> None:
        """The run has made its last write: record the results that came, and give the lease
        back now, or once the calls still in flight have been recorded."""
        with self.lock:
            self._run_over, self._release = True, release
        self._settle()

    def _settle(self) -> None:
        """Once the run is over: record the abandoned calls whose threads have all returned;
        when none is left, give the lease back (whichever thread records last does)."""
        with self.lock:
            if not self._run_over:
                return
            ready = [a for a in self._waiting if not a.running]
            self._waiting = [a for a in self._waiting if a.running]
            self._recording += len(ready)
        for arrival in ready:
            try:
                if arrival.outcome is not None:
                    self._record(arrival.call_id, arrival.outcome)
            finally:
                with self.lock:
                    self._recording -= 1
        with self.lock:
            if self._waiting or self._recording:
                return
            release, self._release = self._release, None
        if release is not None:
            release()

    def _record(self, call_id: str, observation: Observation) -> None:
        def change(session: AgentSession) -> None:  # a call decided since is left as it is
            record_late(session, call_id, incoming.observation(observation),
                        max_chars=self.max_chars, at=self.clock())

        try:
            self.store.update(self.session_id, change, owner=self.owner)
        except Exception as exc:  # the store failed: the call stays started (outcome unknown)
            log.warning("the result of call %s, which came after its run stopped, could not "
                        "be saved (%s: %s)", call_id, type(exc).__name__, exc)

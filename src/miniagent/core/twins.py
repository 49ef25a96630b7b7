"""The synchronous twins of an agent's async methods, the same on every driver: ``run`` runs
``arun`` to its end, ``stream`` iterates ``astream`` from a thread of its own, and so on, for
:class:`~miniagent.core.agent.Agent` (in process) and :class:`~miniagent.temporal.TemporalAgent`
alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from miniagent._internal.aio import iterate_in_thread, run_coroutine
from miniagent.core.errors import UserError
from miniagent.core.session import AgentSession
from miniagent.core.types import RunResult

if TYPE_CHECKING:
    from miniagent.core.runtime.events import Event

__all__ = ["SyncTwins", "run_then_close"]

T = TypeVar("T")
Work = Coroutine[Any, Any, T]


class SyncTwins:
    """``run``, ``resume``, ``approve``, ``deny``, ``cancel`` and ``session`` over the async
    methods a subclass defines; each closes the agent after it (its event loop ends)."""

    arun: Callable[..., Work[RunResult]]
    astream: Callable[..., AsyncIterator[Event]]
    aresume: Callable[..., Work[RunResult]]
    aapprove: Callable[..., Work[None]]
    adeny: Callable[..., Work[None]]
    acancel: Callable[..., Work[None]]
    asession: Callable[..., Work[AgentSession]]
    aclose: Callable[[], Work[None]]

    def run(self, question: str, *, metadata: dict[str, Any] | None = None,
            on_event: Any = None, session_id: str | None = None, output_type: Any = None
            ) -> RunResult:
        """Synchronous ``arun``; use ``await agent.arun(...)`` inside an event loop."""
        return self._sync(self.arun(question, metadata=metadata, on_event=on_event,
                                    session_id=session_id, output_type=output_type))

    def stream(self, question: str, *, metadata: dict[str, Any] | None = None,
               session_id: str | None = None, output_type: Any = None) -> Iterator[Event]:
        """Synchronous ``astream``: the run's events for a ``for`` loop, the last one a
        ``RunFinished`` with the result. The run goes on in a thread of its own (its own event
        loop, the agent closed at its end, as ``run`` does); leaving the loop early cancels it,
        as Ctrl-C does ``run``, and returns once it has stopped.

        Raises:
            UserError: called inside a running event loop (use ``async for ... astream``).
        """
        _outside_loop()
        return iterate_in_thread(
            lambda: self.astream(question, metadata=metadata, session_id=session_id,
                                 output_type=output_type),
            run=lambda work: run_then_close(work, self))

    def resume(self, session_id: str, *, on_event: Any = None, force: bool = False
               ) -> RunResult:
        """Synchronous ``aresume``."""
        return self._sync(self.aresume(session_id, on_event=on_event, force=force))

    def approve(self, session_id: str, call_id: str | None = None, reason: str | None = None,
                *, arguments: dict[str, Any] | None = None, force: bool = False) -> None:
        """Synchronous ``aapprove``."""
        self._now(self.aapprove(session_id, call_id, reason, arguments=arguments, force=force))

    def deny(self, session_id: str, call_id: str | None = None, reason: str | None = None,
             *, force: bool = False) -> None:
        """Synchronous ``adeny``."""
        self._now(self.adeny(session_id, call_id, reason, force=force))

    def cancel(self, session_id: str, reason: str = "cancelled by a person", *,
               force: bool = False) -> None:
        """Synchronous ``acancel``."""
        self._now(self.acancel(session_id, reason, force=force))

    def session(self, session_id: str) -> AgentSession:
        """Synchronous ``asession``."""
        return self._sync(self.asession(session_id))

    def _now(self, work: Work[None]) -> None:
        """A decision or a cancel, from synchronous code (a driver whose decisions need no
        event loop runs them in place)."""
        self._sync(work)

    def _sync(self, work: Work[T]) -> T:
        return run_then_close(work, self)


def run_then_close(work: Work[T], agent: Any) -> T:
    """Run ``work`` from synchronous code, then close ``agent`` (its ``aclose``):
    ``asyncio.run`` makes a new event loop each time, and connections die with it.

    Raises:
        UserError: called inside a running event loop, where the async twin belongs.
    """
    try:
        _outside_loop()
    except UserError:
        work.close()
        raise
    return run_coroutine(_then_close(work, agent))


def _outside_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError("a synchronous Agent method was called inside a running event loop; "
                    "use its async twin there ('await agent.arun(...)', astream, aresume, "
                    "aapprove, adeny, acancel, asession)")


async def _then_close(work: Work[T], agent: Any) -> T:
    try:
        return await work
    finally:
        await agent.aclose()

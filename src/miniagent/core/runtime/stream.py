"""A run's events as an async iterator: ``async for event in agent.astream(question)``.

No second loop: the run is ``arun(question, on_event=feed)`` in a task of its own, and ``feed``
(one subscriber of that run on the agent's :class:`~miniagent.core.runtime.inprocess.EventBus`)
hands each event to a bounded queue that the iterator reads. The bus delivers on its own
thread; while the queue is full, that thread waits (so the bus's later deliveries wait, never
the run). Once the run's task is done and everything it emitted was delivered, the stream ends:
its last item is a :class:`~miniagent.core.runtime.events.RunFinished` carrying the
:class:`~miniagent.core.types.RunResult` (made from the result where the driver ended the run
without one: a Temporal session that waits for a person). What the run raised, the stream raises.

Leaving the stream early (``break``, ``aclose()``, the generator collected) cancels the run's
task, as Ctrl-C cancels ``arun``: in process the session stays as its last checkpoint left it and
``resume`` goes on with it; on Temporal the client stops following and the workflow goes on
(``resume`` follows it again). ``break`` leaves the closing to the garbage collector, a moment
later: to have the session's lease back at once, close the stream yourself
(``async with contextlib.aclosing(agent.astream(q)) as events:``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from miniagent.core.runtime.events import Event, RunFinished
from miniagent.core.runtime.loop import CANCEL_GRACE
from miniagent.core.types import RunResult

if TYPE_CHECKING:
    from miniagent.core.runtime.inprocess import EventBus

__all__ = ["STREAM_BUFFER", "stream_run"]

STREAM_BUFFER = 256
"""Events a stream holds for a reader that has not taken them yet."""

_END = object()
"""Put after the run's last event."""

_LOOP_CHECK = 1.0
"""Seconds between looks, while the queue stays full, at whether the stream's loop has closed."""


class _Feed:
    """The run's subscriber: puts each event into the stream's queue on the stream's loop,
    waiting (on the bus's thread) while the queue is full; drops everything once closed."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        self.loop, self.queue = loop, queue
        self.closed = False
        self._putting: concurrent.futures.Future[None] | None = None

    def __call__(self, event: Event) -> None:
        self.put(event)

    def put(self, item: object) -> None:
        if self.closed:
            return
        try:
            putting = asyncio.run_coroutine_threadsafe(self.queue.put(item), self.loop)
        except RuntimeError:  # the loop has closed: nobody reads any more
            return
        self._putting = putting
        while not self.closed:
            try:
                putting.result(timeout=_LOOP_CHECK)
                return
            except concurrent.futures.TimeoutError:
                if self.loop.is_closed():
                    break
            except concurrent.futures.CancelledError:
                return
        putting.cancel()

    def close(self) -> None:
        self.closed = True
        putting = self._putting
        if putting is not None:
            putting.cancel()  # a put waiting for room gives up at once


async def stream_run(start: Callable[..., Awaitable[RunResult]], bus: EventBus, *,
                     buffer: int = STREAM_BUFFER) -> AsyncIterator[Event]:
    """The events of the run ``start(on_event=...)`` makes, as they are delivered on ``bus``; the
    last one a :class:`RunFinished` with the run's result (see the module docstring)."""
    queue: asyncio.Queue[Any] = asyncio.Queue(buffer)
    feed = _Feed(asyncio.get_running_loop(), queue)
    task = asyncio.ensure_future(start(on_event=feed))
    task.add_done_callback(lambda _: bus.when_delivered(lambda: feed.put(_END)))
    last: Event | None = None
    try:
        while (item := await queue.get()) is not _END:
            last = item
            yield item
        result = task.result()  # what the run raised is raised here
        if not (isinstance(last, RunFinished) and last.session_id == result.session_id):
            yield RunFinished(session_id=result.session_id, span_id="", result=result)
    finally:
        feed.close()
        if not task.done():
            task.cancel()  # as Ctrl-C cancels arun: the session stays resumable
            await asyncio.wait({task}, timeout=CANCEL_GRACE)
        elif not task.cancelled():
            task.exception()  # seen: a stream left early does not report it as unretrieved

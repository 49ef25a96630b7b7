"""EventBus: hands events to subscribers without letting them hold up the run.

Events are queued and delivered, in order, by one daemon thread per bus, so a slow
subscriber (a terminal, a trace exporter) delays only later deliveries, never the loop. A
subscriber that raises is reported through :mod:`logging` and never breaks the run.
:meth:`EventBus.flush` waits (boundedly) until what was emitted so far has been delivered: the
in-process driver calls it before asking a person and at the end of a run, so a run's
``run_finished`` has reached its subscribers when ``arun`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from miniagent.core.runtime.events import Event  # no event is built without a subscriber

log = logging.getLogger("miniagent")

Subscriber = Callable[["Event"], None]

_Job = tuple["Event", tuple[Subscriber, ...]] | Callable[[], None]


class EventBus:
    """Agent-wide subscribers, plus the ones each run brings (``emit(..., extra)``).

    Args:
        subscribers: Called with every event, in this order.
        flush_timeout: The longest :meth:`flush` waits for a slow subscriber, in seconds.
    """

    def __init__(self, subscribers: Sequence[Subscriber] = (), *,
                 flush_timeout: float = 5.0) -> None:
        self._subscribers: tuple[Subscriber, ...] = tuple(subscribers)
        self.flush_timeout = flush_timeout
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers = (*self._subscribers, subscriber)

    def emit(self, event: Event, extra: tuple[Subscriber, ...] = ()) -> None:
        """Queue ``event`` for the agent's subscribers and ``extra``; returns at once."""
        targets = self._subscribers + extra if extra else self._subscribers
        if targets:
            self._jobs.put((event, targets))
            self._ensure_worker()

    async def flush(self) -> None:
        """Wait until every event emitted so far was delivered, or ``flush_timeout`` passed."""
        if self._worker is None:
            return
        loop = asyncio.get_running_loop()
        delivered: asyncio.Future[None] = loop.create_future()

        def mark() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(_resolve, delivered)

        self._jobs.put(mark)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(delivered, self.flush_timeout)

    def _ensure_worker(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._deliver, name="miniagent-events",
                                                daemon=True)
                self._worker.start()

    def _deliver(self) -> None:
        while True:
            job = self._jobs.get()
            if callable(job):
                job()
                continue
            event, targets = job
            for subscriber in targets:
                try:
                    subscriber(event)
                except BaseException:  # SystemExit too (rich on a broken pipe): keep delivering
                    log.exception("event subscriber %r failed on %s", subscriber, event.kind)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

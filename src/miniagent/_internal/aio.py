"""Crossing between sync code and the event loop, both ways, boundedly.

**Blocking functions off the loop** (:func:`run_in_daemon_thread`): sync tools and approval
prompts run on daemon worker threads of our own instead of the loop's default executor: a call
that never returns (a hung tool, a prompt nobody answers) cannot be killed, and with the
default executor ``asyncio.run`` and interpreter exit would wait for it forever. A daemon
thread is simply abandoned once nobody waits for its result.

Workers are reused: a new thread per call cost ~175 µs here, ``asyncio.to_thread`` ~80 µs,
a reused worker ~40 µs. A new worker starts whenever none is idle, so a hung call never
blocks the others; idle workers exit after a minute.

**A coroutine from sync code** (:func:`run_coroutine`, under ``Agent.run``): like
:func:`asyncio.run`, with one difference: at the end, tasks still pending (a tool that ignores
its cancellation, left behind by a deadline) get :data:`LEFTOVER_GRACE` seconds to finish after
being cancelled, instead of being waited for without end. As in ``asyncio.run``, Ctrl-C cancels
the main task (so cleanup code runs) and then raises KeyboardInterrupt.

**An agent's sync methods** (:class:`SyncTwins`): the synchronous twins of its async methods,
the same on every driver: ``run`` runs ``arun`` to its end (with :func:`run_coroutine`),
``stream`` iterates ``astream`` from a thread of its own, and so on, for
:class:`~miniagent.core.agent.Agent` (in process) and :class:`~miniagent.temporal.TemporalAgent`
alike.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import queue
import signal
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from miniagent.core.errors import UserError

if TYPE_CHECKING:  # asyncio loads with a first run, not with the classes that use this module
    import asyncio

    from miniagent.core.runtime.events import Event
    from miniagent.core.session import AgentSession
    from miniagent.core.types import RunResult

T = TypeVar("T")
Work = Coroutine[Any, Any, T]

log = logging.getLogger("miniagent")


# -- blocking functions off the loop ---------------------------------------------------------------

class _Workers:
    """Daemon threads taking jobs from one queue."""

    def __init__(self, idle_timeout: float = 60.0) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0  # workers waiting for a job that no submit has reserved yet
        self._lock = threading.Lock()
        self._idle_timeout = idle_timeout

    def done(self) -> None:
        """Called by a job when its work is over, before its result is handed back, so a
        caller that submits again at once finds this worker idle."""
        with self._lock:
            self._idle += 1

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start_one = self._idle == 0
            if not start_one:
                self._idle -= 1
        self._jobs.put(job)
        if start_one:
            threading.Thread(target=self._work, name="miniagent-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_timeout)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody counts on this worker: leave
                        self._idle -= 1
                        return
                continue
            job()


_WORKERS = _Workers()


def _fresh_workers_after_fork() -> None:
    global _WORKERS  # a forked child has none of the parent's threads, only their count
    _WORKERS = _Workers()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_fresh_workers_after_fork)


async def run_in_daemon_thread(fn: Callable[..., T], *args: Any,
                               on_done: Callable[[Any, BaseException | None], None] | None = None
                               ) -> T:
    """``await`` the result of ``fn(*args)`` run on a daemon worker thread.

    ``on_done``, if given, gets the result (or the exception) on the worker thread as soon
    as ``fn`` returns, whether anybody still waits for it or not (a waiter cancelled, an
    event loop closed: ``fn`` runs to its end anyway). What ``on_done`` raises is logged;
    the waiter gets ``fn``'s outcome all the same.
    """
    import asyncio  # loaded: a loop runs

    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(result: Any, error: BaseException | None) -> None:
        if future.done():  # the waiter was cancelled (tool timeout, run deadline)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    context = contextvars.copy_context()  # the caller's tool context reaches a sync tool

    def job() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # handed to the awaiting task, not lost in the thread
            error = exc
        try:
            if on_done is not None:
                on_done(result, error)
        except Exception:  # e.g. its store closed: the waiter must still get the result
            log.exception("recording the outcome of %r failed", fn)
        finally:
            workers.done()
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits now
                loop.call_soon_threadsafe(deliver, result, error)

    workers = _WORKERS
    workers.submit(job)
    return await future


# -- a coroutine from sync code --------------------------------------------------------------------

LEFTOVER_GRACE = 1.0
"""Seconds pending tasks get to finish once the main coroutine has returned."""


def run_coroutine(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` in a new event loop and close the loop within a bounded time."""
    import asyncio

    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    interrupted = False

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        loop.call_soon_threadsafe(task.cancel)

    try:
        with _sigint_handler(on_sigint):
            try:
                return loop.run_until_complete(task)
            except asyncio.CancelledError:
                if interrupted:
                    raise KeyboardInterrupt from None
                raise
    finally:
        try:
            _settle_leftovers(loop)
        finally:
            loop.close()


def _settle_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    import asyncio

    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for leftover in pending:
        leftover.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=LEFTOVER_GRACE))
    for leftover in pending:
        if not leftover.done():
            # abandoned on purpose: do not report it as "destroyed but pending" later
            leftover._log_destroy_pending = False  # type: ignore[attr-defined]
    loop.run_until_complete(loop.shutdown_asyncgens())


@contextlib.contextmanager
def _sigint_handler(handler: Any) -> Iterator[None]:
    """Install ``handler`` for SIGINT while in the main thread with the default handler."""
    usable = (threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if not usable:
        yield
        return
    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# -- an async iterator from sync code --------------------------------------------------------------

_DONE = object()


def iterate_in_thread(make: Callable[[], AsyncIterator[T]], *,
                      run: Callable[[Coroutine[Any, Any, None]], None] = run_coroutine,
                      buffer: int = 64) -> Iterator[T]:
    """The items of the async iterator ``make()``, for a ``for`` loop: ``run`` (by default
    :func:`run_coroutine`) drives it on a thread of its own, which hands the items over through
    a queue of ``buffer`` items (waiting, without blocking its loop, while the queue is full).
    What it raises is raised here. Leaving the loop early (``break``, ``close()``, an exception
    such as KeyboardInterrupt) cancels the iteration and waits for its thread to end."""
    items: queue.Queue[tuple[bool, Any]] = queue.Queue(buffer)
    pump = _Pump(items, make)
    thread = threading.Thread(target=pump.serve, args=(run,), name="miniagent-stream",
                              daemon=True)
    thread.start()
    done = False
    try:
        while True:
            ok, item = items.get()
            pump.took()
            if item is _DONE:
                done = True
                return
            if not ok:
                raise item
            yield item
    finally:
        if not done:
            pump.stop()
            while items.get()[1] is not _DONE:  # what it still hands over, to its end
                continue
        thread.join()


class _Pump:
    """The thread's side of :func:`iterate_in_thread`."""

    def __init__(self, items: queue.Queue[tuple[bool, Any]],
                 make: Callable[[], AsyncIterator[Any]]) -> None:
        self.items, self.make = items, make
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None
        self.room: asyncio.Event | None = None

    def serve(self, run: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        import asyncio

        try:
            run(self._pump())
        except asyncio.CancelledError:  # the reader left
            pass
        except BaseException as exc:  # handed to the reader, who raises it
            self.items.put((False, exc))
        finally:
            self.started.set()  # a reader that stops waits for nothing more
            self.items.put((True, _DONE))  # the reader takes items until this one

    async def _pump(self) -> None:
        import asyncio  # loaded: a loop runs

        self.loop, self.task = asyncio.get_running_loop(), asyncio.current_task()
        self.room = asyncio.Event()
        self.started.set()
        iterator = self.make()
        try:
            async for item in iterator:
                await self._hand((True, item))
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _hand(self, entry: tuple[bool, Any]) -> None:
        assert self.room is not None
        while True:
            try:
                self.items.put_nowait(entry)
                return
            except queue.Full:
                self.room.clear()  # the reader sets it after each item it takes
                if self.items.full():
                    await self.room.wait()

    def took(self) -> None:
        """The reader took an item: a hand-over waiting for room goes on."""
        self._call(lambda: self.room.set() if self.room is not None else None)

    def stop(self) -> None:
        """The reader left: cancel the iteration (its thread then ends)."""
        self.started.wait()
        if self.task is not None:
            self._call(self.task.cancel)

    def _call(self, fn: Callable[[], Any]) -> None:
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: it is over
                self.loop.call_soon_threadsafe(fn)


# -- the sync twins of an agent's async methods ----------------------------------------

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
    import asyncio

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

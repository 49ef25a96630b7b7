"""The once-per-process record of warm-ups (:mod:`miniagent.core.tools.warmup` runs them through
it).

A warm-up is keyed by the object warmed (:func:`_identity`: a bound method is its function on
its object, a wrapped source the source it wraps). :func:`once` runs it, or waits for the run in
flight (another start's, on any thread or event loop), or finds it warm; :func:`forget` makes it
cold. What the record does with a warm-up that outlives its start (a timeout, a cancelled start,
an event loop that ended) is said in :mod:`miniagent.core.tools.warmup`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from miniagent._internal.aio import run_in_daemon_thread
from miniagent._internal.wording import describe
from miniagent.core.tools.tool import is_async_callable

if TYPE_CHECKING:
    from miniagent.core.tools.warmup import Warmup

__all__ = ["WarmupStatus", "forget", "once"]

WarmupStatus = Literal["warmed", "already_warm", "failed", "timed_out"]
"""``warmed``: this start ran it; ``already_warm``: an earlier or concurrent start did (this
one waited for it if it was in flight); ``failed``: it raised; ``timed_out``: cut at the
timeout."""


async def once(warmup: Warmup, timeout: float | None) -> tuple[WarmupStatus, str | None]:
    """Run ``warmup`` unless it is warm or in flight (then wait for it), within ``timeout``
    seconds; its status, and why it failed or timed out."""
    if _identity(warmup.key)[0] in _warming.get():  # inside its own warm-up: no waiting
        return "already_warm", None
    entry, mine = _claim(warmup.key, warmup.still_warm)
    if mine:
        return await _run(warmup, entry, timeout)
    return await _wait(entry.outcome, timeout)


class _Cut(Exception):
    """What the waiters of a warm-up see when its owner cut it at the timeout."""


class _Failed(Exception):
    """What the waiters of a warm-up see when it raised (its description)."""


_lock = threading.RLock()  # reentrant: a key collected while it is held drops its entry


@dataclass(kw_only=True)
class _Entry:
    """A warm-up in the record: what it belongs to, how it ended, and who runs it."""

    reference: Callable[[], object]
    """Weak where the object allows it: a model or a source nobody else holds is freed, and
    its entry with it."""
    outcome: concurrent.futures.Future[None]
    loop: asyncio.AbstractEventLoop
    """The event loop of the start that runs it."""
    handoff: _Handoff

    def holds(self, anchor: object, still_warm: Callable[[], bool] | None) -> bool:
        """Whether a start finds it warm, or in flight and worth waiting for; else the start
        runs it anew (it failed, went cold, or its event loop ended with it unsettled: an
        async warm-up that ignored its cancellation, which nothing will ever finish)."""
        if self.reference() is not anchor or _failed(self.outcome):
            return False
        if not self.outcome.done():
            return self.handoff.in_thread or not self.loop.is_closed()
        return still_warm is None or still_warm()


_record: dict[tuple[int, ...], _Entry] = {}
"""The key's identity (:func:`_identity`) -> its warm-up."""

_warming: contextvars.ContextVar[frozenset[tuple[int, ...]]] = contextvars.ContextVar(
    "miniagent_warming", default=frozenset())
"""The keys whose warm-up the current task runs inside: an agent among its own tools does not
wait for itself."""


def _identity(key: object) -> tuple[tuple[int, ...], object]:
    """What makes two keys the same warm-up, and the object whose life the entry follows.

    A bound method is a new object at each attribute access (``pool.open`` given to two
    tools is two objects): it is the same warm-up as another of the same function on the same
    object, and lives as long as that object. A wrapped source is the source it wraps: the
    connection warmed, and closed, is that one's.
    """
    from miniagent.core.tools.wrappers import innermost

    if inspect.ismethod(key):
        return (id(key.__self__), id(key.__func__)), key.__self__
    key = innermost(key)
    return (id(key),), key


def forget(*keys: object) -> None:
    """Make ``keys`` cold again: their next start warms them anew (a closed source, or a
    wrapper of it)."""
    with _lock:
        for key in keys:
            number, anchor = _identity(key)
            held = _record.get(number)
            if held is not None and held.reference() is anchor and held.outcome.done():
                del _record[number]


def _claim(key: object, still_warm: Callable[[], bool] | None = None
           ) -> tuple[_Entry, bool]:
    """The record of ``key``'s warm-up, and whether this caller must run it (see
    :meth:`_Entry.holds`)."""
    number, anchor = _identity(key)
    with _lock:
        held = _record.get(number)
        if held is not None and held.holds(anchor, still_warm):
            return held, False
        entry = _record[number] = _Entry(
            reference=_reference(number, anchor), outcome=concurrent.futures.Future(),
            loop=asyncio.get_running_loop(), handoff=_Handoff())
        return entry, True


def _reference(number: tuple[int, ...], anchor: object) -> Callable[[], object]:
    """A weak reference to ``anchor`` that drops its entry when it is freed; the object itself
    (held: its id stays its own) when it cannot be referenced weakly."""

    def dropped(ref: object) -> None:
        with _lock:
            held = _record.get(number)
            if held is not None and held.reference is ref:
                del _record[number]

    try:
        return weakref.ref(anchor, dropped)
    except TypeError:
        return lambda: anchor


def _failed(outcome: concurrent.futures.Future[None]) -> bool:
    return outcome.done() and outcome.exception() is not None


async def _run(warmup: Warmup, entry: _Entry, timeout: float | None
               ) -> tuple[WarmupStatus, str | None]:
    """Start ``warmup`` as a task of its own that settles ``outcome`` when it ends, and wait
    for it like any start does. Past the timeout, or when this start is cancelled, an async
    warm-up is cancelled and a sync one cannot be: either is left behind until it ends, and
    the record stays in flight until then, so later starts wait for it instead of running a
    second copy (at most one thread or task per warm-up, however often starts give up)."""
    token = _warming.set(_warming.get() | {_identity(warmup.key)[0]})
    try:
        work = asyncio.ensure_future(_settling(warmup.run, entry.outcome, entry.handoff))
    finally:
        _warming.reset(token)
    outcome = entry.outcome
    _LEFT.add(work)  # a task left behind must not be collected before it ends
    work.add_done_callback(_LEFT.discard)
    try:
        status, error = await _wait(outcome, timeout)
    except BaseException:  # this start was cancelled: do not wait for the warm-up to agree
        work.cancel()
        raise
    if status == "already_warm":  # this start ran it
        return "warmed", None
    if status == "timed_out" and not outcome.done():
        work.cancel()
        return status, f"did not finish within {timeout:g} s (warm-up timeout)"
    return status, error


_LEFT: set[asyncio.Future[None]] = set()
"""Warm-up tasks under way, held so that one left behind is not collected before it ends."""


async def _settling(run: Callable[[], Any], outcome: concurrent.futures.Future[None],
                    handoff: _Handoff) -> None:
    """Run a warm-up and settle ``outcome`` with how it ended. A sync one settles it from its
    own thread, so that a thread that outlives its start (or its event loop) still does."""
    try:
        if is_async_callable(run):
            await run()
        else:
            handoff.waiting = handoff.in_thread = True
            pending = await run_in_daemon_thread(_in_thread, run, outcome, handoff)
            handoff.waiting = False
            if pending is not None:  # a sync function that returned an awaitable
                await pending
        _settle(outcome, None)
    except asyncio.CancelledError:
        if handoff.give_up():  # else a thread goes on, and settles it itself
            _settle(outcome, _Cut("the warm-up was cancelled"))
        raise
    except BaseException as exc:  # anything it raised, SystemExit too, is its failure
        _settle(outcome, _Failed(describe(exc)))


class _Handoff:
    """Between a sync warm-up's thread and its task: an awaitable the function returned is
    handed to the task only while the task still waits for the thread."""

    def __init__(self) -> None:
        self.waiting = False  # the task waits for the thread
        self.in_thread = False  # the function runs on its thread (which settles the outcome)
        self.handed = False  # the thread handed it an awaitable
        self._lock = threading.Lock()

    def take(self) -> bool:
        """In the thread: whether the task will await what the function returned."""
        with self._lock:
            self.handed = self.waiting
            return self.handed

    def give_up(self) -> bool:
        """In the cancelled task: whether it must settle the outcome itself (no thread will:
        it was not in one, or the thread handed over an awaitable that nobody awaits now)."""
        with self._lock:
            in_thread, self.waiting = self.waiting, False
            return not in_thread or self.handed


def _in_thread(run: Callable[[], Any], outcome: concurrent.futures.Future[None],
               handoff: _Handoff) -> Awaitable[Any] | None:
    try:
        return _run_sync(run, outcome, handoff)
    finally:  # only once the outcome is settled, or an awaitable handed to its task
        handoff.in_thread = False


def _run_sync(run: Callable[[], Any], outcome: concurrent.futures.Future[None],
              handoff: _Handoff) -> Awaitable[Any] | None:
    try:
        result = run()
    except BaseException as exc:  # on a worker thread: whatever it raised is the warm-up's
        _settle(outcome, _Failed(describe(exc)))
        return None
    if not inspect.isawaitable(result):
        _settle(outcome, None)
        return None
    if handoff.take():
        return result
    _settle(outcome, _Cut("the warm-up was cancelled"))  # its start gave up on it
    close = getattr(result, "close", None)
    if callable(close):  # a coroutine nobody will await: no "never awaited" warning
        close()
    return None


def _settle(outcome: concurrent.futures.Future[None], error: Exception | None) -> None:
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # settled already
        if error is None:
            outcome.set_result(None)
        else:
            outcome.set_exception(error)


async def _wait(outcome: concurrent.futures.Future[None], timeout: float | None
                ) -> tuple[WarmupStatus, str | None]:
    """Wait for a warm-up that another start runs (or ran); shielded, so that giving up here
    leaves it running for its owner."""
    settled = asyncio.wrap_future(outcome)
    settled.add_done_callback(_seen)  # given up on, it still settles: no "never retrieved"
    try:
        await asyncio.wait_for(asyncio.shield(settled), timeout)
    except asyncio.TimeoutError:
        return "timed_out", f"waited {timeout:g} s for the warm-up in flight (warm-up timeout)"
    except _Cut as exc:
        return "timed_out", str(exc)
    except _Failed as exc:
        return "failed", str(exc)
    return "already_warm", None


def _seen(settled: asyncio.Future[None]) -> None:
    """Retrieve how a warm-up ended for a waiter that no longer waits (its timeout passed, or
    it was cancelled): the owner reports it, so asyncio need not log it as never retrieved."""
    if not settled.cancelled():
        settled.exception()

"""Warm-ups: paying a slow first call at start instead of in the first step.

What can be warmed:

- a tool that declares a warm-up, ``@tool(warmup=fn)`` (``fn`` sync or async, no arguments:
  open a connection pool, load an index, fill a cache);
- a tool source with an ``async warmup()`` method: an MCP server starts (or reaches) its server
  and lists its tools; an agent used as a tool warms its own agent; the wrappers of
  :mod:`miniagent.tools.wrappers` pass it on; a :class:`~miniagent.tools.registry.ToolRegistry`
  runs its tools' warm-ups;
- a model with a ``warmup(request)`` method: the embedded model loads its weights and evaluates
  the prompt of the first request, so that the first step finds it in the KV cache.

:meth:`Agent.start <miniagent.agent.Agent.start>` (and ``async with agent:``) runs what its
tools, sources and model declare with :func:`run_warmups`: all at once, each under a timeout.

Once per process: a record keyed by the object warmed (a tool's warm-up function, a source, a
model) remembers the warm-ups that succeeded, so a second agent sharing a tool or a source does
not warm it again, and a start that meets a warm-up in flight (another agent's, on any thread)
waits for that one. A warm-up that failed or timed out is not recorded: it is reported, the
tool stays usable (its first call pays the cold start, as without warm-up), and the next start
tries again. Closing an agent (:meth:`Agent.aclose <miniagent.agent.Agent.aclose>`) makes its
sources cold again (:func:`forget`): a closed MCP server's connection is gone. A source may
also say it went cold (``is_warm()``: an MCP server whose process has ended since), and so may
a model (the embedded model after ``unload()``): its next start warms it again.

A warm-up cut at its timeout, or whose start was cancelled, may go on: a sync one cannot be
stopped (its thread runs until the function returns), an async one may ignore its cancellation.
It is left behind, at most one per warm-up: until it ends, later starts wait for it (within
their own timeout) instead of running it a second time, and if it then succeeds the thing is
warm. A thread settles the record whenever it ends; an async warm-up still running when its
event loop is closed (it ignored that cancellation too) never will, so a start in another loop
runs it anew.

Nothing here raises on a warm-up's failure: the :class:`WarmupReport` says what warmed, how long
it took, and what failed and why; each failure is also logged as a warning (logger
``miniagent``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from miniagent.errors import ToolError
from miniagent.threads import run_in_daemon_thread
from miniagent.tools.runner import describe, is_async_callable

if TYPE_CHECKING:
    from miniagent.tools.registry import Tool
    from miniagent.tools.source import ToolSource

__all__ = ["Warmup", "WarmupOutcome", "WarmupReport", "forget", "model_warmups", "run_warmups",
           "source_warmups", "tool_warmups", "warm_all"]

log = logging.getLogger("miniagent")

WarmupStatus = Literal["warmed", "already_warm", "failed", "timed_out"]
"""``warmed``: this start ran it; ``already_warm``: an earlier or concurrent start did (this
one waited for it if it was in flight); ``failed``: it raised; ``timed_out``: cut at the
timeout."""


@dataclass(frozen=True, kw_only=True)
class Warmup:
    """One thing to warm.

    Attributes:
        name: what the report calls it (``tool search``, ``MCPServer('time')``, ...).
        key: the object whose warm-up this is: it is warmed once per process (a bound method
            is its function on its object; a wrapped source is the source it wraps).
        run: the warm-up, called with no arguments; sync (run on a worker thread) or async.
        still_warm: asked before a start counts it as warm already: False makes it run again
            (an MCP server whose process died since, an unloaded model: their ``is_warm``);
            None: once warm, warm for the process.
    """

    name: str
    key: object
    run: Callable[[], Any]
    still_warm: Callable[[], bool] | None = None


@dataclass(frozen=True, kw_only=True)
class WarmupOutcome:
    """How one warm-up went.

    Attributes:
        name: the :attr:`Warmup.name`.
        status: see :data:`WarmupStatus`.
        seconds: how long this start spent on it (waiting for another's included).
        error: why it failed or that it timed out; ``None`` when it is warm.
    """

    name: str
    status: WarmupStatus
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the thing is warm now."""
        return self.status in ("warmed", "already_warm")

    def __str__(self) -> str:
        if self.ok:
            return f"{self.name}: {self.status.replace('_', ' ')} ({self.seconds:.2f} s)"
        return f"{self.name}: {self.error}"


@dataclass(frozen=True, kw_only=True)
class WarmupReport:
    """What a start warmed, how long each took, and what failed and why.

    Attributes:
        outcomes: one per warm-up, in the order they were declared.
        seconds: the wall time of the whole start (the warm-ups ran concurrently).
    """

    outcomes: tuple[WarmupOutcome, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every warm-up succeeded (also when there was none)."""
        return all(outcome.ok for outcome in self.outcomes)

    @property
    def failed(self) -> list[WarmupOutcome]:
        """The warm-ups that failed or timed out."""
        return [outcome for outcome in self.outcomes if not outcome.ok]

    @property
    def warmed(self) -> list[str]:
        """The names of the warm-ups this start ran and that succeeded."""
        return [outcome.name for outcome in self.outcomes if outcome.status == "warmed"]

    def __str__(self) -> str:
        if not self.outcomes:
            return "nothing to warm up"
        done = sum(outcome.ok for outcome in self.outcomes)
        text = f"{done} of {len(self.outcomes)} warm in {self.seconds:.2f} s"
        return "; ".join([text, *(f"failed: {outcome}" for outcome in self.failed)])


# -- what an agent's tools and sources declare -----------------------------------------------

def tool_warmups(tools: Iterable[Tool]) -> list[Warmup]:
    """The warm-ups of ``tools`` that declare one, keyed by the warm-up function (so copies of
    a tool, made by a wrapper's options, share it, and so do tools given the same method of
    one object)."""
    return [Warmup(name=f"tool {tool.name}", key=tool.warmup, run=tool.warmup)
            for tool in tools if tool.warmup is not None]


def source_warmups(sources: Iterable[ToolSource]) -> list[Warmup]:
    """What ``sources`` declare: each tool's warm-up for a registry of functions, the source's
    own ``warmup()`` for any other source that has one."""
    from miniagent.tools.registry import ToolRegistry
    from miniagent.tools.wrappers import innermost

    found: list[Warmup] = []
    for source in sources:
        if isinstance(innermost(source), ToolRegistry):
            found += tool_warmups(innermost(source).listed())  # type: ignore[attr-defined]
            continue
        warmup, still_warm = getattr(source, "warmup", None), getattr(
            innermost(source), "is_warm", None)
        if callable(warmup):
            found.append(Warmup(name=_label(source), key=source, run=warmup,
                                still_warm=still_warm if callable(still_warm) else None))
    return found


def model_warmups(model: object, run: Callable[[], Any] | None = None) -> list[Warmup]:
    """The warm-up of ``model`` if it has one (a ``warmup`` method): ``run``, or its own
    ``warmup()`` called without a request (the embedded model then only loads); its
    ``is_warm()``, if it has one, says when it went cold (an unloaded model)."""
    warmup, still_warm = getattr(model, "warmup", None), getattr(model, "is_warm", None)
    if model is None or not callable(warmup):
        return []
    from miniagent.observe.describe import describe_model

    return [Warmup(name=f"model {describe_model(model).name}", key=model, run=run or warmup,
                   still_warm=still_warm if callable(still_warm) else None)]


def _label(source: object) -> str:
    text = repr(source)
    return text if len(text) <= 120 else f"{text[:117]}..."


# -- running them ----------------------------------------------------------------------------

async def run_warmups(warmups: Sequence[Warmup], *, timeout: float | None
                      ) -> WarmupReport:
    """Run ``warmups`` concurrently, each at most once per process and within ``timeout``
    seconds (``None``: no limit); never raises for a warm-up's failure.

    Example:
        >>> import asyncio
        >>> loaded = []
        >>> report = asyncio.run(run_warmups(
        ...     [Warmup(name="index", key=loaded, run=lambda: loaded.append("index"))],
        ...     timeout=5.0))
        >>> report.warmed, loaded
        (['index'], ['index'])
    """
    report = await _report(warmups, timeout)
    for outcome in report.failed:
        log.warning("warm-up of %s failed: %s (it warms on first use instead)",
                    outcome.name, outcome.error)
    return report


async def warm_all(warmups: Sequence[Warmup]) -> None:
    """Run ``warmups`` like :func:`run_warmups`, without a timeout of their own (the caller's
    applies), and raise :class:`~miniagent.errors.ToolError` naming those that failed: the
    ``warmup()`` of a source that warms several things.
    """
    report = await _report(warmups, None)
    if not report.ok:
        raise ToolError("; ".join(str(outcome) for outcome in report.failed))


async def _report(warmups: Sequence[Warmup], timeout: float | None) -> WarmupReport:
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(_once(warmup, timeout) for warmup in warmups))
    return WarmupReport(outcomes=tuple(outcomes), seconds=time.perf_counter() - started)


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
    from miniagent.tools.wrappers import innermost

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


async def _once(warmup: Warmup, timeout: float | None) -> WarmupOutcome:
    started = time.perf_counter()
    if _identity(warmup.key)[0] in _warming.get():  # inside its own warm-up: no waiting
        return WarmupOutcome(name=warmup.name, status="already_warm", seconds=0.0)
    entry, mine = _claim(warmup.key, warmup.still_warm)
    if mine:
        status, error = await _run(warmup, entry, timeout)
    else:
        status, error = await _wait(entry.outcome, timeout)
    return WarmupOutcome(name=warmup.name, status=status, error=error,
                         seconds=time.perf_counter() - started)


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
    try:
        await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(outcome)), timeout)
    except asyncio.TimeoutError:
        return "timed_out", f"waited {timeout:g} s for the warm-up in flight (warm-up timeout)"
    except _Cut as exc:
        return "timed_out", str(exc)
    except _Failed as exc:
        return "failed", str(exc)
    return "already_warm", None


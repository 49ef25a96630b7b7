"""Limits shared by every session of a process: calls of a tool at once, model requests.

One process may run many sessions at once (``arun`` tasks on one loop, sync ``Agent.run``
calls each on a loop of its own in its own thread, a Temporal worker's activities). The
limits here are kept per process, not per agent or per loop, so they hold across all of them:

- :class:`Slots`: at most N holders at once, waiters served first come, first served. It is
  safe across event loops and threads (a ``threading.Lock`` guards the count; a slot freed on
  one loop wakes the next waiter on its own loop), where an ``asyncio.Semaphore`` belongs to
  one loop. The toolbox keeps one per tool (:func:`tool_slots`): ``@tool(max_concurrency=4)``.
  A tool's slots belong to its definition (a :class:`SlotKey` its copies share: a renamed,
  prefixed or re-ruled copy counts against the same limit), not to its name, so two tools
  that happen to share a name never wait for each other. A call made inside a call of the
  same tool (an agent that calls itself, through any depth) finds that its callers hold a
  slot (:func:`held_by_callers`), and the toolbox refuses it rather than let it wait: two
  such calls, each holding one of two slots, would each wait for the other's.
- :class:`RateWindow`: at most N units (requests, or tokens) started in any 60 seconds,
  reserved in arrival order.
- :class:`Endpoint`: what the sessions sharing a model endpoint share (:func:`endpoint`): its
  :class:`EndpointLimits` (requests in flight, requests and tokens per minute) and a pause:
  after a 429, every request to the endpoint waits until its ``Retry-After`` has passed, not
  only the one that got it.

Waiting is reported: a limit that makes a call wait calls
:func:`~miniagent.core.types.report_wait`, which reaches the reporter the step logic
installed around the call (a ``slot_waiting`` event; on Temporal the worker's activity relays
it to the workflow).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from miniagent._internal.wording import counted
from miniagent.core.errors import ConfigError
from miniagent.core.types import SlotKey, report_wait

__all__ = ["Admission", "Endpoint", "EndpointLimits", "RateWindow", "Slots",
           "endpoint", "held_by_callers", "holding", "tool_slots"]


# -- at most N at once -------------------------------------------------------------------------


@dataclasses.dataclass(eq=False, slots=True)
class _Waiter:
    """A caller queued for a slot, woken through a future of its own event loop."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    limit: int
    granted: bool = False
    gone: bool = False  # gave up or was cancelled: skipped when its turn comes


_GONE_KEPT = 64
"""Waiters that gave up left in a queue before it is swept (see :meth:`Slots._leave`)."""


class Slots:
    """At most N holders at once, over every event loop and thread of the process.

    Each :meth:`acquire` names its limit (so the limit can live with whoever asks: a tool, a
    model); the first waiter is served first, and a waiter is admitted only while fewer than
    its limit hold a slot. A slot is handed straight to the next waiter on release, on the
    waiter's own loop.

    Example:
        >>> import asyncio
        >>> slots = Slots()
        >>> async def main() -> tuple[bool, int]:
        ...     got = await slots.acquire(2)
        ...     busy = slots.busy
        ...     slots.release()
        ...     return got, busy
        >>> asyncio.run(main())
        (True, 1)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._queue: deque[_Waiter] = deque()
        self._waiting = 0  # waiters in the queue that have not gone

    @property
    def busy(self) -> int:
        """How many hold a slot now."""
        return self._busy

    @property
    def queued(self) -> int:
        """How many wait for one."""
        return self._waiting

    def try_acquire(self, limit: int) -> bool:
        """Take a slot if one is free and nobody waits; never waits."""
        with self._lock:
            if self._busy < limit and not self._waiting:
                self._busy += 1
                return True
        return False

    async def acquire(self, limit: int, *, until: float | None = None,
                      on_wait: Callable[[], None] | None = None) -> bool:
        """Wait for a slot (first come, first served); True once held.

        Args:
            limit: At most this many hold a slot while this caller is admitted.
            until: Give up at this time (seconds since the epoch): then False, and no slot
                is held (nor is one handed over once this time has passed: a caller past
                its deadline never goes on to use the slot).
            on_wait: Called once if the caller has to wait.
        """
        if self.try_acquire(limit):
            return True
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future(), max(1, limit))
        with self._lock:
            if self._busy < limit and not self._waiting:  # freed meanwhile
                self._busy += 1
                return True
            self._queue.append(waiter)
            self._waiting += 1
        try:
            if on_wait is not None:
                on_wait()
            timeout = None if until is None else max(0.0, until - time.time())
            await asyncio.wait({waiter.future}, timeout=timeout)
        except BaseException:
            # cancelled, or on_wait raised: it leaves the queue, and a slot handed over
            # meanwhile goes to the next waiter
            if self._leave(waiter):
                self.release()
            raise
        held = self._leave(waiter)
        if held and until is not None and time.time() >= until:  # handed over too late
            self.release()
            return False
        return held

    def release(self) -> None:
        """Give a slot back; the next waiter that fits gets it."""
        with self._lock:
            self._busy = max(0, self._busy - 1)
            woken = self._admit()
        self._wake(woken)

    def _leave(self, waiter: _Waiter) -> bool:
        """Whether ``waiter`` holds a slot; if not, it leaves the queue (marked gone: O(1),
        so that cancelling many waiters at once stays linear; swept once most are gone)."""
        with self._lock:
            if waiter.granted:
                return True
            if not waiter.gone:
                waiter.gone = True
                self._waiting -= 1
                if len(self._queue) > 2 * self._waiting + _GONE_KEPT:
                    # behind a slot held for long, those who gave up would pile up without
                    # end: dropped once they are most of the queue (linear overall still)
                    self._queue = deque(w for w in self._queue if not w.gone)
            woken = self._admit()  # it may have held up waiters of a larger limit
        self._wake(woken)
        return False

    def _admit(self) -> list[_Waiter]:
        woken = []
        while self._queue:
            head = self._queue[0]
            if head.gone:
                self._queue.popleft()
                continue
            if self._busy >= head.limit:
                break
            self._queue.popleft()
            head.granted = True
            self._busy += 1
            self._waiting -= 1
            woken.append(head)
        return woken

    def _wake(self, woken: list[_Waiter]) -> None:
        """Tell each waiter handed a slot, on its loop. A waiter whose loop has closed will
        never use its slot: it goes to the next waiters, in a loop rather than by recursion
        (a closed loop may leave thousands queued)."""
        while woken:
            dead = 0
            for waiter in woken:
                try:
                    waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
                except RuntimeError:  # its loop has closed
                    dead += 1
            if not dead:
                return
            with self._lock:
                self._busy = max(0, self._busy - dead)
                woken = self._admit()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# -- at most N a minute ------------------------------------------------------------------------


@dataclasses.dataclass(eq=False, slots=True)
class _Entry:
    """One reservation in a rate window: when it starts and how many units it takes."""

    start: float
    amount: int


class RateWindow:
    """At most ``limit`` units started in any ``span`` seconds (a sliding log).

    Each :meth:`take` reserves the earliest start that keeps every window within the limit,
    after the reservations made before it (first come, first served), and sleeps until then.
    One take larger than the limit goes alone in its window. :meth:`settle` corrects a
    reservation once the real amount is known (tokens: the usage the server reported).
    """

    def __init__(self, span: float = 60.0) -> None:
        self.span = span
        self._lock = threading.Lock()
        self._entries: deque[_Entry] = deque()
        self._total = 0

    def reserve(self, amount: int, limit: int, now: float) -> _Entry:
        """Book ``amount`` at the earliest start from ``now`` (monotonic seconds) on."""
        with self._lock:
            entries, span = self._entries, self.span
            while entries and entries[0].start <= now - span:
                self._total -= entries.popleft().amount
            start = max(now, entries[-1].start) if entries else now
            used, first = self._total, 0
            while first < len(entries) and entries[first].start <= start - span:
                used -= entries[first].amount
                first += 1
            while first < len(entries) and used + amount > limit:
                start = entries[first].start + span  # when the oldest one leaves the window
                while first < len(entries) and entries[first].start <= start - span:
                    used -= entries[first].amount
                    first += 1
            entry = _Entry(start, max(0, amount))
            entries.append(entry)
            self._total += entry.amount
            return entry

    def settle(self, entry: _Entry, amount: int) -> None:
        """The real amount of a reservation."""
        with self._lock:
            if entry in self._entries:
                self._total += max(0, amount) - entry.amount
            entry.amount = max(0, amount)

    def cancel(self, entry: _Entry) -> None:
        """Free a reservation that was not used."""
        with self._lock, contextlib.suppress(ValueError):
            self._entries.remove(entry)
            self._total -= entry.amount

    async def take(self, amount: int, limit: int, *,
                   on_wait: Callable[[], None] | None = None) -> _Entry:
        """Reserve ``amount`` and wait until its start."""
        entry = self.reserve(amount, limit, time.monotonic())
        delay = entry.start - time.monotonic()
        if delay > 0:
            try:
                if on_wait is not None:
                    on_wait()
                await asyncio.sleep(delay)
            except BaseException:  # cancelled, or on_wait raised: the booking is freed
                self.cancel(entry)
                raise
        return entry


# -- model endpoints ---------------------------------------------------------------------------

WINDOW_SECONDS = 60.0
"""The window of ``requests_per_minute`` and ``tokens_per_minute`` (tests shorten it)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class EndpointLimits:
    """Limits on a model endpoint, shared by every session and model object of the process
    that talk to it (same base URL and model name).

    Attributes:
        max_concurrency: Requests in flight at once.
        requests_per_minute: Requests started in any 60 seconds (each retry is a request).
        tokens_per_minute: Tokens in any 60 seconds: a request reserves an estimate of its
            prompt plus its ``max_tokens`` before it is sent, corrected to the usage the
            server reports once it answers (an error answer, a 429 included, counts none).

    Raises:
        ConfigError: A limit that is not a positive integer.

    Example:
        >>> EndpointLimits(max_concurrency=4, requests_per_minute=60).tokens_per_minute is None
        True
    """

    max_concurrency: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ConfigError(f"EndpointLimits.{field.name} must be a positive integer "
                                  f"or None, got {value!r}")

    @property
    def any(self) -> bool:
        return any(getattr(self, f.name) is not None for f in dataclasses.fields(self))


@dataclasses.dataclass(eq=False, slots=True)
class Admission:
    """One request let through an endpoint: give it back with :meth:`done`, and say how
    many tokens it really used with :meth:`used`."""

    endpoint: Endpoint
    slot: bool = False
    request: _Entry | None = None
    tokens: _Entry | None = None

    def used(self, tokens: int) -> None:
        if self.tokens is not None:
            self.endpoint.tokens.settle(self.tokens, tokens)

    def done(self) -> None:
        if self.slot:
            self.slot = False
            self.endpoint.slots.release()


class Endpoint:
    """What the requests to one model endpoint share in this process (see :func:`endpoint`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.slots = Slots()
        self.requests = RateWindow(WINDOW_SECONDS)
        self.tokens = RateWindow(WINDOW_SECONDS)
        self._paused_until = 0.0  # monotonic
        self._lock = threading.Lock()

    def pause(self, seconds: float) -> None:
        """No request to this endpoint starts in the next ``seconds`` (after a 429)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + max(0.0, seconds))

    @property
    def paused_until(self) -> float:
        """When the latest pause ends (:func:`time.monotonic`; 0: never paused)."""
        return self._paused_until

    @property
    def paused_for(self) -> float:
        """Seconds left of the pause (0: none)."""
        return max(0.0, self._paused_until - time.monotonic())

    async def admit(self, limits: EndpointLimits | None, tokens: int = 0) -> Admission:
        """Wait until a request may start: a slot, the pause over, room in each minute."""
        admission = Admission(self)
        what = f"model {self.name}"
        try:
            if limits is not None and limits.max_concurrency is not None:
                reason = f"{counted(limits.max_concurrency, 'request')} in flight (max_concurrency)"
                await self.slots.acquire(limits.max_concurrency,
                                         on_wait=lambda: report_wait(what, reason))
                admission.slot = True
            if self.paused_for:  # checked before a coroutine is made: most requests pass
                await self._unpaused(what)
            if limits is not None and limits.requests_per_minute is not None:
                rate = counted(limits.requests_per_minute, "request")
                reason = f"{rate} a minute (requests_per_minute)"
                admission.request = await self.requests.take(
                    1, limits.requests_per_minute, on_wait=lambda: report_wait(what, reason))
            if limits is not None and limits.tokens_per_minute is not None:
                rate = counted(limits.tokens_per_minute, "token")
                reason = f"{rate} a minute (tokens_per_minute)"
                admission.tokens = await self.tokens.take(
                    tokens, limits.tokens_per_minute, on_wait=lambda: report_wait(what, reason))
            if self.paused_for:  # a 429 may have come in meanwhile
                await self._unpaused(what)
        except BaseException:  # cancelled: nothing was sent, nothing is counted
            admission.done()
            if admission.request is not None:
                self.requests.cancel(admission.request)
            if admission.tokens is not None:
                self.tokens.cancel(admission.tokens)
            raise
        return admission

    async def _unpaused(self, what: str) -> None:
        reported = False
        while (left := self.paused_for) > 0:
            if not reported:
                report_wait(what, f"the endpoint asked to back off (429) for {left:.1f} s")
                reported = True
            await asyncio.sleep(left)


# -- the process's registry --------------------------------------------------------------------

_LOCK = threading.Lock()
_TOOLS: weakref.WeakKeyDictionary[SlotKey, Slots] = weakref.WeakKeyDictionary()
_ENDPOINTS: dict[str, Endpoint] = {}
_HELD: contextvars.ContextVar[tuple[SlotKey, ...]] = contextvars.ContextVar(
    "miniagent_slots_held", default=())
"""The tool slots the calls enclosing this one hold (a sub-agent's calls see its caller's)."""


def tool_slots(key: Any) -> Slots:
    """The slots of the tool ``key`` names (a :class:`SlotKey`, or a tool: its ``slot_key``),
    shared by every session of the process (and forgotten with the last tool that holds it)."""
    key = getattr(key, "slot_key", key)
    if not isinstance(key, SlotKey):  # a name no longer says which tool: copies share slots
        raise TypeError(f"tool_slots takes a tool or its slot_key, got "
                        f"{type(key).__name__} {key!r:.60}")
    with _LOCK:
        found = _TOOLS.get(key)
        if found is None:
            found = _TOOLS[key] = Slots()
    return found


def held_by_callers(key: SlotKey) -> int:
    """How many of ``key``'s slots the calls that enclose the current one hold."""
    return _HELD.get().count(key)


@contextlib.contextmanager
def holding(key: SlotKey) -> Iterator[None]:
    """Mark a slot of ``key`` as held by the current call, for the calls made inside it."""
    token = _HELD.set((*_HELD.get(), key))
    try:
        yield
    finally:
        _HELD.reset(token)


def endpoint(base_url: str, model: str) -> Endpoint:
    """What the requests to ``model`` at ``base_url`` share in this process."""
    key = f"{model} at {base_url}"
    found = _ENDPOINTS.get(key)
    if found is None:
        with _LOCK:
            found = _ENDPOINTS.setdefault(key, Endpoint(key))
    return found


def _forget_after_fork() -> None:
    global _LOCK  # a forked child has none of the parent's calls in flight
    _LOCK = threading.Lock()
    _TOOLS.clear()
    _ENDPOINTS.clear()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_after_fork)

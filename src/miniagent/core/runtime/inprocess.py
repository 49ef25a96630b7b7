"""The in-process driver: performs the step logic's effects in this process.

Model calls go to the agent's model, tool calls to the run's toolbox (each to the source that
owns the tool), checkpoints to a :class:`~miniagent.core.store.base.CheckpointStore` under the run's
lease, decisions to the inline approver (when there is one), events to the agent's bus. That is
all a driver does: the run itself (deadline, statuses, the last save) is
:func:`~miniagent.core.runtime.loop.run_session`'s. The parts of it, each in its section:

- **Effects** (:class:`InProcessEffects`): the :class:`~miniagent.core.runtime.effects.Effects`
  of one run, and the route of a streaming model's deltas to the bus (:class:`DeltaRoute`).
- **Event delivery** (:class:`EventBus`): events are queued and delivered, in order, by one
  daemon thread per bus, so a slow subscriber (a terminal, a trace exporter) delays only later
  deliveries, never the loop. A subscriber that raises is reported through :mod:`logging` and
  never breaks the run. :meth:`EventBus.flush` waits (boundedly) until what was emitted so far
  has been delivered: the driver calls it before asking a person and at the end of a run, so a
  run's ``run_finished`` has reached its subscribers when ``arun`` returns.
- **Asking a person** (:func:`ask`, :func:`ask_or_take`): the driver asks its approver (a
  terminal's y/n prompt) one waiting call after another, on a worker thread. While it asks, the
  run holds the session's lease; a store that can take decisions for a lease holder (the SQLite
  store: :mod:`miniagent.core.store.decision_door`) lets ``miniagent sessions approve`` in
  another shell record one, and :func:`ask_or_take` sees it by polling: the question is given up
  (the approver's ``give_up()``, when it has one) and the run goes on with the decision as
  recorded. A decision made elsewhere wins over an answer given here to the same call.
- **Late results** (:class:`LateCalls`): a sync tool runs on a worker thread, which nothing can
  stop: when its run is cancelled (Ctrl-C in ``miniagent chat``, a task cancelled) or hits its
  deadline, the call goes on, and may still pay, send or delete. Dropping its result would leave
  the call ``started``: a resume would call its outcome unknown and offer to run it again. So
  the driver keeps the session's lease while such a call is in flight; when its result has come
  (the source tells :data:`~miniagent.core.tools.toolbox.late_result`) and the run has made its
  last save (which still shows the call ``started``), it is written to the call's record,
  ``completed``, and then the lease is given back. Work that is not on a thread (an async tool,
  an MCP server) stops with its run: nothing is kept for it. A resume meanwhile is refused as
  busy; a call that never returns holds the lease until this process ends (its outcome is then
  unknown, truly, and a resume asks a person).
- **The collector under load** (:class:`RunLoad`): each in-flight run keeps a few hundred
  objects alive across its awaits (its session, the request being answered, futures, coroutine
  frames). With thousands of runs interleaved, nearly every such object outlives the young
  generations and is promoted, so the collector's full passes, each over every live object,
  come ever more often: measured with ``benchmarks/overhead.py``, 10,000 concurrent 3-step runs
  spent half their CPU time in it. While at least :data:`GC_BUSY` runs are in flight,
  :data:`run_load` raises the collector's first threshold to :data:`GC_YOUNG` allocations (fewer,
  larger young collections: transient objects die before they are examined, and far fewer are
  promoted); once fewer than half of that are left, it puts the threshold back. Nothing is freed
  later except garbage in reference cycles, which runs rarely make. It leaves the collector alone
  when the collector is disabled, when the first threshold is already :data:`GC_YOUNG` or more,
  and when someone changed it in the meantime; set :data:`gc_tuning` to False to leave it alone
  always.
- **A run inside a tool call** (:func:`within_caller`): an agent used as a tool draws on what its
  caller's call has left (tokens, deadline, model calls) instead of starting afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from miniagent._internal.aio import run_in_daemon_thread
from miniagent.core.models.base import Model
from miniagent.core.runtime.guards import admit_observation
from miniagent.core.runtime.loop import warmup_request
from miniagent.core.runtime.run import AgentSpec, rules_for, with_small_model_aids
from miniagent.core.session import AgentSession, Approver, record_late, relayed_decision
from miniagent.core.store.base import CheckpointStore, random_id
from miniagent.core.tools.toolbox import Toolbox, ToolSource, late_result
from miniagent.core.types import (
    CallRecord,
    Decision,
    ModelRequest,
    ModelResponse,
    Observation,
    PendingApproval,
    ToolCall,
    ToolContext,
    current_context,
)

if TYPE_CHECKING:  # events are built only for a listener (their module loads with it)
    from miniagent.core.models.streaming import DeltaChannel, DeltaSink
    from miniagent.core.protocol.base import ActionProtocol
    from miniagent.core.runtime.events import Event, ModelStarted

__all__ = ["GC_BUSY", "GC_YOUNG", "POLL_SECONDS", "Arrival", "DecisionDoor", "DeltaRoute",
           "EventBus", "InProcessEffects", "LateCalls", "RunLoad", "Subscriber", "ask",
           "ask_or_take", "decided", "gc_tuning", "run_load"]

log = logging.getLogger("miniagent")



# -- effects ---------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class InProcessEffects:
    """The effects of one run, performed here (see
    :class:`~miniagent.core.runtime.effects.Effects`)."""

    model: Model
    tools: Toolbox
    store: CheckpointStore
    bus: EventBus
    owner: str | None = None
    session_id: str = ""
    late: LateCalls | None = None
    """Where results of calls left in flight by a cancelled run are recorded."""
    approver: Approver | None = None
    subscribers: tuple[Subscriber, ...] = ()
    clock: Callable[[], float] = time.time
    ids: Callable[[], str] = random_id
    deltas: DeltaRoute = field(default_factory=lambda: DeltaRoute())

    def generate(self, request: ModelRequest) -> Coroutine[Any, Any, ModelResponse]:
        """The model's own call, handed back to be awaited (one await level less on each of
        its resumes)."""
        # the route first: a model's capabilities are built on each read, and only a call
        # someone listens to (model_started was emitted) can have a sink
        sink = self.deltas.sink(self)
        if sink is None or not self.model.capabilities.streaming:
            return self.model.generate(request)
        return self.model.generate(request, on_delta=sink)  # type: ignore[call-arg]

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        """Run ``call`` in the toolbox; if the run stops waiting for it, a result that still
        comes is recorded (:class:`LateCalls`)."""
        if self.late is None:
            return await self.tools.execute(call, context)
        arrival = self.late.expect(call.id)
        token = late_result.set(arrival)
        try:
            return await self.tools.execute(call, context)
        except asyncio.CancelledError:
            self.late.abandon(arrival)
            raise
        finally:
            late_result.reset(token)

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        if call is None:
            self.store.save(session, owner=self.owner)
        else:
            self.store.save_call(session, call, owner=self.owner)

    async def wait_for_decision(self, pending: list[PendingApproval], until: float | None
                                ) -> dict[str, Decision]:
        """Ask the inline approver, if any; without one every call keeps waiting (the session
        is saved waiting: a person decides from any process sharing the store). While it
        asks, a decision recorded by another process is taken (:func:`ask_or_take`)."""
        if self.approver is None:
            return {}
        await self.bus.flush()  # the trace so far is shown before a person is asked
        if self.owner is None or not self.session_id or not hasattr(
                self.store, "accept_decisions"):
            return await ask(self.approver, pending)
        door = cast("DecisionDoor", self.store)  # a decision made elsewhere is taken too
        return await ask_or_take(self.approver, pending, door, self.session_id, self.owner)

    def now(self) -> float:
        return self.clock()

    def new_id(self) -> str:
        return self.ids()

    @property
    def observed(self) -> bool:
        return bool(self.subscribers or self.bus._subscribers)  # read ~20 times a run

    def emit(self, event: Event) -> None:
        self.deltas.follow(event)
        self.bus.emit(event, self.subscribers)


class DeltaRoute:
    """Takes a streaming model's deltas to the bus as ``model_delta`` events.

    The step logic announces each model call with ``model_started`` (only when someone
    listens); the route remembers that call's session, step and span, and the deltas of the
    ``generate`` that follows are emitted in it. The step logic itself never sees a delta.
    """

    def __init__(self) -> None:
        self._call: ModelStarted | None = None

    def follow(self, event: Event) -> None:
        kind = event.kind  # by kind: no import of the events module on every event
        if kind == "model_started":
            self._call = cast("ModelStarted", event)
        elif kind in ("model_responded", "model_failed"):
            self._call = None

    def sink(self, effects: InProcessEffects) -> DeltaSink | None:
        """A delta sink for the model call just announced, or None when nobody listens."""
        started = self._call
        if started is None:
            return None
        from miniagent.core.runtime.events import ModelDelta  # loaded: model_started was emitted

        def deliver(channel: DeltaChannel, text: str) -> None:
            effects.emit(ModelDelta(
                session_id=started.session_id, span_id=started.span_id,
                parent_id=started.parent_id, step=started.step, at=effects.now(),
                text=text, channel=channel))

        return deliver


# -- event delivery --------------------------------------------------------------------------------

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

        self.when_delivered(mark)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(delivered, self.flush_timeout)

    def when_delivered(self, job: Callable[[], None]) -> None:
        """Call ``job`` on the delivery thread once every event emitted so far was delivered
        (a stream ends this way after its run's last event)."""
        self._jobs.put(job)
        self._ensure_worker()

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
                try:
                    job()
                except Exception:  # the delivery thread outlives it
                    log.exception("an event bus job failed")
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


# -- asking a person -------------------------------------------------------------------------------

POLL_SECONDS = 0.25
"""How often a run waiting at the approval prompt looks for a decision made elsewhere."""


class DecisionDoor(Protocol):
    """What a store offers a lease holder that waits for decisions (the SQLite store)."""

    def accept_decisions(self, session_id: str, owner: str, accept: bool = True) -> int: ...

    def decisions_arrived(self, session_id: str, owner: str) -> int: ...

    def load(self, session_id: str) -> AgentSession: ...


async def ask(approver: Approver, pending: list[PendingApproval],
              answers: dict[str, Decision] | None = None,
              stopped: asyncio.Event | None = None) -> dict[str, Decision]:
    """Ask ``approver`` about each call in turn, on a worker thread, until ``stopped``;
    the answers (None leaves a call waiting), gathered in ``answers``."""
    answers = {} if answers is None else answers
    for item in pending:
        if stopped is not None and stopped.is_set():
            break
        try:
            answer = await run_in_daemon_thread(approver, item)
        except Exception as exc:  # the call stays waiting: it never runs unapproved
            log.warning("the approver failed on call %s (%s: %s); it keeps waiting",
                        item.call_id, type(exc).__name__, exc)
            continue
        if answer is not None:
            answers[item.call_id] = Decision(approved=bool(answer))
    return answers


async def ask_or_take(approver: Approver, pending: list[PendingApproval], store: DecisionDoor,
                      session_id: str, owner: str) -> dict[str, Decision]:
    """:func:`ask`, while the store takes decisions from other processes for ``owner``; the
    answers given here, and over them the decisions recorded elsewhere."""
    store.accept_decisions(session_id, owner)
    answers: dict[str, Decision] = {}
    stopped = asyncio.Event()
    asking = asyncio.ensure_future(ask(approver, pending, answers, stopped))
    try:
        while not asking.done():
            await asyncio.wait({asking}, timeout=POLL_SECONDS)
            if asking.done():
                break
            # off the loop: the read may wait as long as the store's busy timeout
            came: int = await run_in_daemon_thread(store.decisions_arrived, session_id, owner)
            if came and not asking.done():
                stopped.set()
                await _give_up(approver)
                break
    finally:
        if not asking.done():  # a question nobody answers now: its thread is abandoned
            asking.cancel()
        arrived = store.accept_decisions(session_id, owner, accept=False)
    if asking.done() and not asking.cancelled():
        asking.result()  # (it raises nothing: a failing approver is logged)
    if not arrived:
        return answers
    return {**answers, **decided(store.load(session_id), pending)}


async def _give_up(approver: Any) -> None:
    """End the question being asked, unanswered, if the approver can (off the event loop:
    it may wait a moment for its thread)."""
    give_up = getattr(approver, "give_up", None)
    if callable(give_up):
        await run_in_daemon_thread(give_up)


def decided(session: AgentSession, pending: list[PendingApproval]) -> dict[str, Decision]:
    """The decisions recorded in ``session`` for the ``pending`` calls."""
    wanted = {p.call_id for p in pending}
    found: dict[str, Decision] = {}
    for record in session.open_calls():
        if record.call.id not in wanted or record.state not in ("approved", "denied"):
            continue
        found[record.call.id] = relayed_decision(record) or Decision(
            approved=record.state == "approved", reason=record.note,
            arguments=record.edited_arguments)
    return found


# -- late results ----------------------------------------------------------------------------------

@dataclass(kw_only=True)
class Arrival:
    """One call's work on worker threads, as the source tells it
    (:class:`~miniagent.core.tools.toolbox.LateResult`), and whether its run stopped waiting."""

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
            record_late(session, call_id, admit_observation(observation),
                        max_chars=self.max_chars, at=self.clock())

        try:
            self.store.update(self.session_id, change, owner=self.owner)
        except Exception as exc:  # the store failed: the call stays started (outcome unknown)
            log.warning("the result of call %s, which came after its run stopped, could not "
                        "be saved (%s: %s)", call_id, type(exc).__name__, exc)


# -- the collector under load ----------------------------------------------------------------------

GC_BUSY = 200
"""Runs in flight in this process from which the collector's first threshold is raised."""

GC_YOUNG = 50_000
"""The collector's first threshold (allocations between young collections) while busy."""

gc_tuning = True
"""Whether :class:`RunLoad` may tune the collector at all (module-wide switch)."""


class RunLoad:
    """Counts the runs in flight and tunes the collector past :data:`GC_BUSY` of them."""

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
            if self.runs < GC_BUSY or self._saved is not None or not gc_tuning:
                return
            current = gc.get_threshold()
            if gc.isenabled() and 0 < current[0] < GC_YOUNG:
                self._saved = current
                gc.set_threshold(GC_YOUNG, *current[1:])

    def _leave(self) -> None:
        with self._lock:
            self.runs -= 1
            if self._saved is None or self.runs >= GC_BUSY // 2:
                return
            saved, self._saved = self._saved, None
            if gc.get_threshold() == (GC_YOUNG, *saved[1:]):  # unless someone changed it since
                gc.set_threshold(*saved)


run_load = RunLoad()
"""The process's one count of in-flight runs (every in-process run enters it)."""


# -- warming the model's prompt cache --------------------------------------------------------------

async def warm_model_prompt(model: Any, sources: Sequence[ToolSource], spec: AgentSpec,
                            protocol: ActionProtocol | None = None) -> None:
    """``model.warmup`` with the first request a run of ``spec`` over ``sources`` sends before
    its question (:func:`~miniagent.core.runtime.loop.warmup_request`), so that a first step finds
    that prompt in the embedded model's cache; the aids ``spec`` left to the model are decided
    by it. Only loading when the tools cannot be listed (their source's warm-up says why)."""
    from miniagent.core.tools.toolbox import Toolbox

    request = None
    with contextlib.suppress(Exception):
        caps = model.capabilities
        if caps.needed_aids() and spec.aids_from_model:
            spec = with_small_model_aids(spec, caps.needed_aids())
        rules = rules_for(spec, await Toolbox.gather(sources), tool_mode=caps.tool_mode,
                          native_tools=caps.native_tools, protocol=protocol)
        request = warmup_request(rules)
    await model.warmup(request)


# -- a run started from inside a tool call ------------------------------------------------

def within_caller(spec: AgentSpec, session: AgentSession) -> AgentSpec:
    """``spec``, its limits narrowed to what the tool call running this run has left (its
    budget, deadline and model calls), when a run is started from inside one (an agent used
    as a tool): nested runs draw on their parent's limits instead of starting afresh."""
    context = current_context()
    if context is None:
        return spec
    limits, changes = spec.limits, dict[str, Any]()
    if context.tokens_left is not None:
        allowed = session.turn.usage.counted_tokens + context.tokens_left
        changes["token_budget"] = min(limits.token_budget or allowed, allowed)
    if context.deadline is not None:
        left = max(0.001, context.deadline - time.time())
        changes["timeout"] = min(limits.timeout or left, left)
    if context.steps_left is not None:
        changes["max_steps"] = min(limits.max_steps, len(session.turn_steps) + context.steps_left)
    return spec.replace(limits=changes) if changes else spec

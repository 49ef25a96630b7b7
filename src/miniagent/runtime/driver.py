"""The in-process driver: performs the step logic's effects in this process.

Model calls go to the agent's model, tool calls to its tools (sync ones on daemon worker
threads), checkpoints to a :class:`~miniagent.store.base.CheckpointStore` under the run's lease,
decisions to the inline approver (when there is one), events to the agent's bus. The run's
deadline is an ``asyncio`` timeout around the step logic, and whatever ends a run (the
deadline, a store fault, a bug of ours) still ends it with a status.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from miniagent.errors import SessionError
from miniagent.models.base import Model
from miniagent.models.streaming import DeltaChannel, DeltaSink
from miniagent.runtime.approvals import Approver
from miniagent.runtime.bus import EventBus, Subscriber
from miniagent.runtime.events import Event, ModelDelta, ModelFailed, ModelResponded, ModelStarted
from miniagent.runtime.loop import Rules, StepLogic
from miniagent.session import AgentSession
from miniagent.store.base import CheckpointStore
from miniagent.threads import run_in_daemon_thread
from miniagent.tool_context import ToolContext, using_context
from miniagent.tools.registry import ToolRegistry
from miniagent.types import (
    CallRecord,
    Decision,
    ModelRequest,
    ModelResponse,
    Observation,
    PendingApproval,
    RunResult,
    ToolCall,
)

log = logging.getLogger("miniagent")


class _Ids:
    """64 random bits per id from a generator seeded by the OS once per process (reading the
    OS's source for each of the ~13 ids of a run cost 4 µs each); a fork reseeds."""

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self._random = random.Random(os.urandom(32))

    def __call__(self) -> str:
        return f"{self._random.getrandbits(64):016x}"


random_id = _Ids()
"""A new id: 16 hex digits, unique (not secret: ids are not credentials)."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=random_id.reseed)


@dataclass(kw_only=True)
class InProcessEffects:
    """The effects of one run, performed here (see :class:`~miniagent.runtime.loop.Effects`)."""

    model: Model
    tools: ToolRegistry
    store: CheckpointStore
    bus: EventBus
    owner: str | None = None
    approver: Approver | None = None
    subscribers: tuple[Subscriber, ...] = ()
    clock: Callable[[], float] = time.time
    ids: Callable[[], str] = random_id
    deltas: DeltaRoute = field(default_factory=lambda: DeltaRoute())

    async def generate(self, request: ModelRequest) -> ModelResponse:
        sink = self.deltas.sink(self) if self.model.capabilities.streaming else None
        if sink is None:
            return await self.model.generate(request)
        return await self.model.generate(request, on_delta=sink)  # type: ignore[call-arg]

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        with using_context(context):
            return await self.tools.execute(call)

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        if call is None:
            self.store.save(session, owner=self.owner)
        else:
            self.store.save_call(session, call, owner=self.owner)

    async def wait_for_decision(self, pending: list[PendingApproval]) -> dict[str, Decision]:
        """Ask the inline approver, if any; without one every call keeps waiting."""
        if self.approver is None:
            return {}
        await self.bus.flush()  # the trace so far is shown before a person is asked
        decisions: dict[str, Decision] = {}
        for item in pending:
            try:
                answer = await run_in_daemon_thread(self.approver, item)
            except Exception as exc:  # the call stays waiting: it never runs unapproved
                log.warning("the approver failed on call %s (%s: %s); it keeps waiting",
                            item.call_id, type(exc).__name__, exc)
                continue
            if answer is not None:
                decisions[item.call_id] = Decision(approved=bool(answer))
        return decisions

    def now(self) -> float:
        return self.clock()

    def new_id(self) -> str:
        return self.ids()

    @property
    def observed(self) -> bool:
        return bool(self.subscribers) or self.bus.has_subscribers

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
        if isinstance(event, ModelStarted):
            self._call = event
        elif isinstance(event, (ModelResponded, ModelFailed)):
            self._call = None

    def sink(self, effects: InProcessEffects) -> DeltaSink | None:
        """A delta sink for the model call just announced, or None when nobody listens."""
        started = self._call
        if started is None:
            return None

        def deliver(channel: DeltaChannel, text: str) -> None:
            effects.emit(ModelDelta(
                session_id=started.session_id, span_id=started.span_id,
                parent_id=started.parent_id, step=started.step, at=effects.now(),
                text=text, channel=channel))

        return deliver


CANCEL_GRACE = 1.0
"""Seconds the run's work gets to wind down after its deadline before it is left behind."""


async def drive(session: AgentSession, rules: Rules, effects: InProcessEffects,
                timeout: float | None) -> RunResult:
    """Run the step logic on ``session`` under a deadline; always returns a result."""
    logic = StepLogic(rules, effects)
    store_failed = False
    try:
        await _within(logic.run(session), timeout)
    except asyncio.TimeoutError:
        logic.stop(session, "timeout", f"the run exceeded its deadline of {timeout} s")
    except SessionError as exc:  # another process took the session over, or a damaged store
        logic.stop(session, "error", str(exc))
        store_failed = True
    except Exception as exc:  # a bug of ours must still end the run with a status
        log.exception("internal error in session %s", session.id)
        logic.stop(session, "error", f"internal error: {type(exc).__name__}: {exc}")
    logic.settle(session)
    if not store_failed:
        effects.store.save(session, owner=effects.owner)
    result = logic.finished(session)
    await effects.bus.flush()
    return result


async def _within(work: Coroutine[Any, Any, None], timeout: float | None) -> None:
    """Await ``work``; past ``timeout`` cancel it and raise TimeoutError within
    :data:`CANCEL_GRACE` seconds, even if something in it ignores the cancellation."""
    if timeout is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE)
    raise asyncio.TimeoutError

"""The in-process driver: performs the step logic's effects in this process.

Model calls go to the agent's model, tool calls to the run's toolbox (each to the source that
owns the tool), checkpoints to a :class:`~miniagent.core.store.base.CheckpointStore` under the run's
lease, decisions to the inline approver (when there is one), events to the agent's bus. That is
all a driver does: the run itself (deadline, statuses, the last save) is
:func:`~miniagent.core.runtime.run.run_session`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from miniagent._internal.ids import random_id
from miniagent.core.models.base import Model
from miniagent.core.runtime.approvals import Approver
from miniagent.core.runtime.asking import ask, ask_or_take
from miniagent.core.runtime.bus import EventBus, Subscriber
from miniagent.core.runtime.late_calls import LateCalls
from miniagent.core.runtime.loop import warmup_request
from miniagent.core.runtime.spec import AgentSpec, rules_for, with_small_model_aids
from miniagent.core.session import AgentSession
from miniagent.core.store.base import CheckpointStore
from miniagent.core.tools.registry import late_result
from miniagent.core.tools.toolbox import Toolbox, ToolSource
from miniagent.core.types import (
    CallRecord,
    Decision,
    ModelRequest,
    ModelResponse,
    Observation,
    PendingApproval,
    ToolCall,
    ToolContext,
)

if TYPE_CHECKING:  # events are built only for a listener (their module loads with it)
    from miniagent.core.models.streaming import DeltaChannel, DeltaSink
    from miniagent.core.protocol.base import ActionProtocol
    from miniagent.core.runtime.asking import DecisionDoor
    from miniagent.core.runtime.events import Event, ModelStarted

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

    async def generate(self, request: ModelRequest) -> ModelResponse:
        sink = self.deltas.sink(self) if self.model.capabilities.streaming else None
        if sink is None:
            return await self.model.generate(request)
        return await self.model.generate(request, on_delta=sink)  # type: ignore[call-arg]

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        """Run ``call`` in the toolbox; if the run stops waiting for it, a result that still
        comes is recorded (:mod:`.late_calls`)."""
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
        asks, a decision recorded by another process is taken (:mod:`.asking`)."""
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


async def warm_model_prompt(model: Any, sources: Sequence[ToolSource], spec: AgentSpec,
                            protocol: ActionProtocol | None = None) -> None:
    """``model.warmup`` with the first request a run of ``spec`` over ``sources`` sends before
    its question (:func:`~miniagent.core.runtime.loop.warmup_request`), so that a first step finds
    that prompt in the embedded model's cache; the aids ``spec`` left to the model are decided
    by it. Only loading when the tools cannot be listed (their source's warm-up says why)."""
    request = None
    with contextlib.suppress(Exception):
        caps = model.capabilities
        if caps.needed_aids() and spec.aids_from_model:
            spec = with_small_model_aids(spec, caps.needed_aids())
        rules = rules_for(spec, await Toolbox.gather(sources), tool_mode=caps.tool_mode,
                          native_tools=caps.native_tools, protocol=protocol)
        request = warmup_request(rules)
    await model.warmup(request)

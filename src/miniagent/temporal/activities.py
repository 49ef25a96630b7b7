"""The activities of a session: call the model, run one tool call.

They run in the worker, with its model and its toolbox; the workflow only sees their inputs and
results. A tool activity hands the call to the toolbox (the same executor as in process: it
validates the call and runs it in the source that owns the tool) with a
:class:`~miniagent.core.types.ToolContext` whose idempotency key is the workflow id and the
activity id (stable across retries), and heartbeats while the tool runs so that a dead worker
is noticed within the heartbeat timeout. A tool's transient failures are tried again inside the
activity, by that executor, with the tool's retry policy (or the run's, which the input
carries); the activity's own retries are for a worker that failed (see ``faults.tool_retry``).
Observations come back whole: the step logic cuts them to the agent's limit, once, as on every
driver. A model reply comes back without the server's body, but with the model's name
(``raw={"model": ...}``: the server's answer, else the worker's model), which the client's
traces and metrics name the model by.

With ``metrics`` (a :class:`~miniagent.observe.metrics.Metrics`), each attempt of a model call
and each tool call is counted in the worker (``miniagent worker --metrics``); runs, steps,
approvals and guards are the workflow's, counted where its events are followed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from pydantic_core import to_json
from temporalio import activity
from temporalio.exceptions import ApplicationError

from miniagent.core import errors
from miniagent.core.models.base import Model
from miniagent.core.models.describe import describe_model
from miniagent.core.tools.toolbox import Toolbox
from miniagent.core.types import (
    ModelRequest,
    ModelResponse,
    Observation,
    ToolContext,
    reporting_waits,
)
from miniagent.temporal.contracts import SlotWait, ToolInput
from miniagent.temporal.faults import PAYLOAD_LIMIT, PAYLOAD_TOO_LARGE, model_failure

MODEL_NAME_CHARS = 200
"""The most characters of a model's name a reply keeps in the workflow's history."""

GENERATE, RUN_TOOL = "miniagent.generate", "miniagent.run_tool"
SMALL_MODEL = "miniagent.small_model"
"""The local activity telling a workflow whether the worker's model is small (see
:attr:`~miniagent.core.runtime.run.AgentSpec.aids_from_model`)."""
SLOT_WAITING = "slot_waiting"
"""The signal by which an activity tells its workflow that a call waits for a slot."""
MODEL_WAIT = "model"
"""The key of a model call's waits (a tool call's is its activity id)."""


def without_retries(model: Model) -> Model:
    """``model`` with its HTTP client's own retries off: Temporal's retry policy decides."""
    if getattr(model, "max_retries", 0):
        model = copy.copy(model)
        model.max_retries = 0  # type: ignore[attr-defined]
    return model


class SessionActivities:
    """The activities of one worker, over its model and its tools.

    Args:
        model: The model every session of this worker's task queue uses.
        tools: The worker's tools, listed once.
        heartbeat_every: Seconds between heartbeats while a tool runs.
        metrics: Where model and tool calls are counted
            (:class:`~miniagent.observe.metrics.Metrics`), or None.
    """

    def __init__(self, model: Model, tools: Toolbox, *, heartbeat_every: float = 1.0,
                 metrics: Any = None) -> None:
        self.model = without_retries(model)
        self.aids = list(model.capabilities.needed_aids())
        self.model_name = describe_model(model).name
        self.tools = tools
        self.heartbeat_every = heartbeat_every
        self.metrics = metrics

    def _named(self, raw: Any) -> dict[str, str]:
        """``{"model": ...}``: the name the server answered with, else the worker's model's."""
        name = raw.get("model") if isinstance(raw, dict) else None
        if not isinstance(name, str) or not name:
            name = self.model_name
        return {"model": name[:MODEL_NAME_CHARS]}

    def all(self) -> list[Callable[..., Any]]:
        return [self.generate, self.run_tool, self.is_small_model]

    @activity.defn(name=SMALL_MODEL)
    async def is_small_model(self) -> list[str]:
        """The aids this worker's model needs, by name (none: an empty list): asked once by a
        session whose client left the small-model aids to the workers' model (a local
        activity: its answer is in the history, so a replay on a worker with another model
        takes the same decision)."""
        return self.aids

    @activity.defn(name=GENERATE)
    async def generate(self, request: ModelRequest) -> ModelResponse:
        started, relay = time.perf_counter(), WaitRelay.here(MODEL_WAIT)
        try:
            with reporting_waits(relay):
                response = await self.model.generate(request)
        except errors.ModelError as exc:
            if self.metrics is not None:
                self.metrics.model_call(elapsed=time.perf_counter() - started, error=exc)
            raise model_failure(exc) from None
        finally:
            if relay is not None:
                await relay.flush()
        if self.metrics is not None:
            self.metrics.model_call(elapsed=time.perf_counter() - started,
                                    usage=response.usage)
        # the body is not kept in history; the model's name is, for the client's traces and
        # metrics (a Temporal agent has no model of its own to name)
        response = dataclasses.replace(response, raw=self._named(response.raw))
        _fits(response, "the model's reply (its text, reasoning and tool calls)")
        return response

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, work: ToolInput) -> Observation:
        info = activity.info()
        context = ToolContext(
            session_id=work.session_id, call_id=work.call.id, tool=work.call.name,
            step=work.step, idempotency_key=f"{info.workflow_id}:{info.activity_id}",
            attempt=info.attempt, metadata=dict(work.metadata), decision=work.decision,
            tokens_left=work.tokens_left, deadline=work.deadline, steps_left=work.steps_left,
            default_retry=work.default_retry)
        relay = WaitRelay.here(info.activity_id)
        with reporting_waits(relay):  # the task inherits it
            task = asyncio.ensure_future(self.tools.execute(work.call, context))
        try:
            while not (await asyncio.wait({task}, timeout=self.heartbeat_every))[0]:
                activity.heartbeat()
        except asyncio.CancelledError:
            task.cancel()
            raise
        if relay is not None:
            await relay.flush()
        observation: Observation = task.result()
        if self.metrics is not None:
            self.metrics.tool_call(session_id=work.session_id, observation=observation)
        _fits(observation, f"the result of call {work.call.id} ({work.call.name})")
        return observation


class WaitRelay:
    """Tells the workflow of this activity that its call waits for a slot (a
    ``slot_waiting`` signal); :meth:`flush` before the activity returns keeps the signal
    ahead of the result in the workflow's history, so the event comes before ``tool_finished``.
    """

    def __init__(self, key: str, client: Any, workflow_id: str, run_id: str | None) -> None:
        self.key, self.client, self.workflow = key, client, (workflow_id, run_id)
        self.loop = asyncio.get_running_loop()
        self.sent: list[concurrent.futures.Future[None]] = []

    @classmethod
    def here(cls, key: str) -> WaitRelay | None:
        """The relay of the activity running now (None where it has no client to signal)."""
        info = activity.info()
        try:
            client = activity.client()
        except RuntimeError:  # an activity run outside a worker (a test environment)
            return None
        if info.workflow_id is None:  # a standalone activity: no workflow to tell
            return None
        return cls(key, client, info.workflow_id, info.workflow_run_id)

    def __call__(self, what: str, reason: str) -> None:
        workflow_id, run_id = self.workflow
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        signal = handle.signal(SLOT_WAITING, SlotWait(key=self.key, what=what, reason=reason))
        self.sent.append(asyncio.run_coroutine_threadsafe(signal, self.loop))

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait (boundedly) until the signals sent so far were delivered; failures are only
        logged: a wait that could not be shown never fails the call."""
        if not self.sent:
            return
        waiting = [asyncio.wrap_future(sent) for sent in self.sent]
        done, _ = await asyncio.wait(waiting, timeout=timeout)
        for item in done:
            if item.exception() is not None:
                activity.logger.info("slot_waiting signal not delivered: %s", item.exception())


def _fits(value: Any, what: str) -> None:
    """Refuse a result over Temporal's payload limit, for good: a retry would pay for the same
    call again and fail the same way (the workflow ends the run with PayloadTooLarge)."""
    size = len(to_json(value, fallback=repr))
    if size > PAYLOAD_LIMIT * 3 // 4:  # what stays for the payload's envelope and metadata
        raise ApplicationError(f"{what} is {size:,} bytes as JSON, over what one Temporal "
                               f"payload can carry ({PAYLOAD_LIMIT:,} bytes)",
                               type=PAYLOAD_TOO_LARGE, non_retryable=True)

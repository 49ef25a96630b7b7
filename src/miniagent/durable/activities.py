"""The activities of a session: describe the worker, call the model, run one tool call.

They run in the worker, with its model and its tool sources; the workflow only sees their
inputs and results. A tool activity installs a :class:`~miniagent.tool_context.ToolContext`
whose idempotency key is the workflow id and the activity id (stable across retries), and
heartbeats while the tool runs so that a dead worker is noticed within the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from miniagent import errors
from miniagent.durable.catalog import describe_tools
from miniagent.durable.contracts import ToolInput, WorkerProfile
from miniagent.durable.faults import PAYLOAD_LIMIT, PAYLOAD_TOO_LARGE, model_failure
from miniagent.models.base import Model
from miniagent.runtime.guards import truncate_observation
from miniagent.tool_context import ToolContext, using_context
from miniagent.tools.registry import ToolRegistry
from miniagent.types import ModelRequest, ModelResponse, Observation

DESCRIBE, GENERATE, RUN_TOOL = "miniagent.describe", "miniagent.generate", "miniagent.run_tool"


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
        tools: The worker's tools (every source gathered into one registry).
        heartbeat_every: Seconds between heartbeats while a tool runs.
    """

    def __init__(self, model: Model, tools: ToolRegistry, *, heartbeat_every: float = 1.0
                 ) -> None:
        self.model = without_retries(model)
        self.tools = tools
        self.heartbeat_every = heartbeat_every

    def all(self) -> list[Callable[..., Any]]:
        return [self.describe, self.generate, self.run_tool]

    @activity.defn(name=DESCRIBE)
    async def describe(self) -> WorkerProfile:
        caps = self.model.capabilities
        return WorkerProfile(tools=describe_tools(self.tools), tool_mode=caps.tool_mode,
                             native_tools=caps.native_tools)

    @activity.defn(name=GENERATE)
    async def generate(self, request: ModelRequest) -> ModelResponse:
        try:
            response = await self.model.generate(request)
        except errors.ModelError as exc:
            raise model_failure(exc) from None
        response = dataclasses.replace(response, raw=None)  # the body is not kept in history
        if len((response.content or "").encode()) > PAYLOAD_LIMIT // 2:
            raise ApplicationError(
                f"the model's reply is {len(response.content or ''):,} characters, too large "
                "for a Temporal payload", type=PAYLOAD_TOO_LARGE, non_retryable=True)
        return response

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, work: ToolInput) -> Observation:
        info = activity.info()
        context = ToolContext(
            session_id=work.session_id, call_id=work.call.id, tool=work.call.name,
            step=work.step, idempotency_key=f"{info.workflow_id}:{info.activity_id}",
            attempt=info.attempt, metadata=dict(work.metadata), decision=work.decision)
        with using_context(context):
            task = asyncio.ensure_future(self.tools.execute(work.call))
        try:
            while not (await asyncio.wait({task}, timeout=self.heartbeat_every))[0]:
                activity.heartbeat()
        except asyncio.CancelledError:
            task.cancel()
            raise
        observation = task.result()
        observation.output = truncate_observation(observation.output, work.max_observation_chars)
        return observation

"""A Temporal worker that serves miniagent sessions: the workflow, and activities over one
model and any number of tool sources.

Tools come from :class:`~miniagent.core.tools.toolbox.ToolSource` objects (a
:class:`~miniagent.core.tools.toolbox.ToolRegistry` of ``@tool`` functions, an MCP server, an
agent, any wrapper of :mod:`miniagent.core.tools.wrappers`), listed once into a toolbox when the
worker starts. The workflows this worker runs read that toolbox (and the model's profile) from
:mod:`miniagent.temporal.workers`; its tool activity runs calls through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from miniagent._internal import defaults
from miniagent.core.models.base import Model
from miniagent.core.protocol.registry import ProtocolRef
from miniagent.core.runtime.inprocess import warm_model_prompt
from miniagent.core.runtime.run import AIDS_FOR, AgentSpec
from miniagent.core.tools.toolbox import Toolbox, ToolSource
from miniagent.core.tools.warmup import (
    WarmupReport,
    model_warmups,
    run_warmups,
    source_warmups,
)
from miniagent.temporal.activities import SessionActivities
from miniagent.temporal.client import DEFAULT_TASK_QUEUE
from miniagent.temporal.workers import Served, register
from miniagent.temporal.workflow import SessionWorkflow

if TYPE_CHECKING:
    from miniagent.core.agent import Agent
    from miniagent.temporal.agent import TemporalAgent

PASSED_THROUGH = ("miniagent", "pydantic", "pydantic_core", "annotated_types", "jsonschema",
                  "docstring_parser")
"""Modules the workflow sandbox imports once, outside it (they keep no per-workflow state)."""


def sandbox() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH))


async def session_worker(client: Client, *, task_queue: str, model: Model,
                         sources: Sequence[ToolSource] = (), heartbeat_every: float = 1.0,
                         metrics: Any = None, warm_up: bool = True,
                         spec: AgentSpec | None = None,
                         warmup_timeout: float | None = defaults.WARMUP_TIMEOUT,
                         **options: Any) -> Worker:
    """A worker for ``task_queue``; run it with ``async with worker:`` or ``await worker.run()``.

    Before it returns (so before the worker polls), the warm-ups of ``sources`` and ``model``
    have run (:func:`warm_served`, each within ``warmup_timeout``): a failure is logged, and
    that tool warms on its first call instead. ``warm_up=False`` leaves that to the caller
    (``miniagent worker`` shows its own). The model's prompt is warmed for ``spec``, the agent
    the worker expects to run most (default: a client's without options; ``agent_worker``:
    its agent's).

    ``metrics`` (a :class:`~miniagent.observe.metrics.Metrics`) counts the model calls and
    tool calls this worker makes, and the runs and approvals of the workflows it runs (their
    events as they happen here, not as a replay rebuilds them).

    ``options`` go to :class:`temporalio.worker.Worker` (e.g. ``max_concurrent_activities``).
    """
    if warm_up:
        await warm_served(sources, model, timeout=warmup_timeout, spec=spec)
    tools = await Toolbox.gather(sources)
    caps = model.capabilities
    register(task_queue, Served(tools=tools, tool_mode=caps.tool_mode,
                                native_tools=caps.native_tools,
                                observe=None if metrics is None else metrics.workflow_event))
    activities = SessionActivities(model, tools, heartbeat_every=heartbeat_every,
                                   metrics=metrics)
    options.setdefault("sticky_queue_schedule_to_start_timeout", timedelta(seconds=1))
    return Worker(client, task_queue=task_queue, workflows=[SessionWorkflow],
                  activities=activities.all(), workflow_runner=sandbox(), **options)


CLIENT_SPEC = AgentSpec(
    protocol=ProtocolRef(options={"grammar": True, "max_tokens": defaults.MAX_TOKENS,
                                  "example": False}),
    aids_from_model=tuple(AIDS_FOR[True]))
"""The spec of an agent built with no model and no options (``TemporalAgent(Agent(), client)``,
``miniagent run --temporal`` without flags): what a worker that serves no agent of its own
warms its model's prompt for."""


async def warm_served(sources: Sequence[ToolSource], model: Model | None, *,
                      timeout: float | None = defaults.WARMUP_TIMEOUT,
                      spec: AgentSpec | None = None) -> WarmupReport:
    """Run the warm-ups of what a worker serves, once per process (see
    :mod:`miniagent.core.tools.warmup`): its tools' and sources', and its model's with the first
    request of a run of ``spec`` over them (default :data:`CLIENT_SPEC`), so that a first step
    of such a run finds its prompt in the embedded model's cache."""
    warm_model = partial(warm_model_prompt, model, sources, spec or CLIENT_SPEC)
    warmups = source_warmups(sources) + model_warmups(model, warm_model)
    return await run_warmups(warmups, timeout=timeout)


async def agent_worker(agent: Agent | TemporalAgent, client: Client | None = None, *,
                       task_queue: str | None = None, **options: Any) -> Worker:
    """A worker serving ``agent``'s model and tools; a :class:`TemporalAgent`'s client and task
    queue by default."""
    from miniagent.core.errors import ConfigError
    from miniagent.temporal.agent import TemporalAgent

    queue = task_queue
    if isinstance(agent, TemporalAgent):
        client, queue, agent = client or agent.client, queue or agent.task_queue, agent.agent
    if client is None:
        raise ConfigError("agent_worker needs a Temporal client: agent_worker(TemporalAgent("
                          "agent, client)) or agent_worker(agent, client)")
    if agent.model is None:
        raise ConfigError("agent_worker needs an agent with a model: the worker serves it")
    options.setdefault("spec", agent.spec)  # its model's prompt is warmed for this agent
    return await session_worker(client, task_queue=queue or DEFAULT_TASK_QUEUE,
                                model=agent.model,
                                sources=agent.sources, **options)

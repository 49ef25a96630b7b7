"""A Temporal worker that serves miniagent sessions: the workflow, and activities over one
model and any number of tool sources.

Tools come from :class:`~miniagent.tools.source.ToolSource` objects (a
:class:`~miniagent.tools.registry.ToolRegistry` of ``@tool`` functions, an MCP server, ...),
listed once when the worker starts, so adding a kind of source is adding it to ``sources``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from miniagent.durable.activities import SessionActivities
from miniagent.durable.workflow import SessionWorkflow
from miniagent.models.base import Model
from miniagent.tools.registry import ToolRegistry
from miniagent.tools.source import ToolSet, ToolSource

if TYPE_CHECKING:
    from miniagent.agent import Agent

PASSED_THROUGH = ("miniagent", "pydantic", "pydantic_core", "annotated_types", "jsonschema",
                  "json_repair", "docstring_parser")
"""Modules the workflow sandbox imports once, outside it (they keep no per-workflow state)."""


def sandbox() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH))


async def gather_tools(sources: Sequence[ToolSource]) -> ToolRegistry:
    """One registry with the tools of every source (names must be unique)."""
    if len(sources) == 1 and isinstance(sources[0], ToolRegistry):
        return sources[0]
    return await ToolSet(ToolRegistry(), sources).for_run()


async def session_worker(client: Client, *, task_queue: str, model: Model,
                         sources: Sequence[ToolSource] = (), heartbeat_every: float = 1.0,
                         **options: Any) -> Worker:
    """A worker for ``task_queue``; run it with ``async with worker:`` or ``await worker.run()``.

    ``options`` go to :class:`temporalio.worker.Worker` (e.g. ``max_concurrent_activities``).
    """
    activities = SessionActivities(model, await gather_tools(sources),
                                   heartbeat_every=heartbeat_every)
    options.setdefault("sticky_queue_schedule_to_start_timeout", timedelta(seconds=1))
    return Worker(client, task_queue=task_queue, workflows=[SessionWorkflow],
                  activities=activities.all(), workflow_runner=sandbox(), **options)


async def agent_worker(agent: Agent, client: Client | None = None, *,
                       task_queue: str | None = None, **options: Any) -> Worker:
    """A worker serving ``agent``'s model and tools (its client and task queue by default)."""
    from miniagent.errors import ConfigError

    target = client or agent.temporal
    queue = task_queue or agent.task_queue
    if target is None:
        raise ConfigError("agent_worker needs a Temporal client: Agent(temporal=client) or "
                          "agent_worker(agent, client)")
    return await session_worker(target, task_queue=queue, model=agent.model,
                                sources=[agent.registry, *agent.tools.sources], **options)

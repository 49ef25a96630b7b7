"""A Temporal worker warms the tools it serves before it polls: when ``agent_worker`` returns,
the warm-up has run (once), and the session's first call, run by the worker, finds it warm."""

from __future__ import annotations

import pytest
from temporal_helpers import act
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, ScriptedModel, tool
from miniagent.temporal import TemporalSessions, agent_worker
from miniagent.temporal.worker import warm_served

pytestmark = pytest.mark.asyncio(loop_scope="session")

loads: list[str] = []


@tool(warmup=lambda: loads.append("index"))
def lookup(key: str) -> str:
    """Look a key up in the index."""
    return f"{key}: {'warm' if loads else 'cold'}"


async def test_the_worker_warms_its_tools_before_it_serves(skip_env: WorkflowEnvironment,
                                                           task_queue: str) -> None:
    agent = Agent(model=ScriptedModel([act("lookup", {"key": "k"}), "Final Answer: done"]),
                  tools=[lookup], temporal=skip_env.client, task_queue=task_queue)
    worker = await agent_worker(agent)
    assert loads == ["index"]  # before the worker polls
    async with worker:
        sessions = TemporalSessions(skip_env.client, task_queue)
        result = await sessions.result(await sessions.start("look k up"))
    assert result.status == "completed"
    assert result.steps[0].observations[0].output == "k: warm"
    again = await warm_served(agent.sources, agent.model)  # what another worker would do
    assert again.outcomes[0].status == "already_warm" and loads == ["index"]

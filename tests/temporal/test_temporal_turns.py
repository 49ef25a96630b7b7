"""Conversations on Temporal: each turn is a workflow execution under the session's id; a
client that started an earlier turn acts on the latest one; a terminated session takes no new
turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, ScriptedModel, tool
from miniagent.core.errors import SessionBusy, TurnRefused
from miniagent.temporal import TemporalAgent, agent_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")

started = asyncio.Event()


@tool
async def slow(city: str) -> str:
    """A slow lookup."""
    started.set()
    await asyncio.sleep(30)
    return city


def act(city: str) -> str:
    return f'Action: slow\nAction Input: {json.dumps({"city": city})}'


_running: set[asyncio.Task[None]] = set()


async def serving(agent: Agent) -> Any:
    worker = await agent_worker(agent)
    _running.add(asyncio.ensure_future(worker.run()))
    return worker


async def test_a_client_of_an_earlier_turn_acts_on_the_latest(dev_env: WorkflowEnvironment,
                                                              task_queue: str) -> None:
    model = ScriptedModel(["Final Answer: one", act("Oslo"), "Final Answer: x"])
    first = TemporalAgent(Agent(model=model, tools=[slow]), dev_env.client, task_queue=task_queue)
    worker = await serving(first)
    try:
        one = await first.arun("q1", session_id="turns-latest")
        assert (one.status, one.turn) == ("completed", 1)
        other = TemporalAgent(Agent(), dev_env.client, task_queue=task_queue)
        started.clear()
        second = asyncio.ensure_future(other.arun("q2", session_id="turns-latest"))
        await asyncio.wait_for(started.wait(), 30)
        with pytest.raises(SessionBusy, match="running a turn"):
            await first.arun("q3", session_id="turns-latest")
        # the first client cancels turn 2, the one running now (not its own closed turn 1)
        assert await first.sessions.cancel("turns-latest") == "cancelling"
        result = await asyncio.wait_for(second, 30)
        assert (result.status, result.turn) == ("cancelled", 2)
        latest = await first.sessions.result("turns-latest")
        assert latest.status == "cancelled"
        with pytest.raises(TurnRefused, match="was cancelled"):
            await first.arun("q4", session_id="turns-latest")
    finally:
        await worker.shutdown()


async def test_a_terminated_session_takes_no_new_turn(dev_env: WorkflowEnvironment,
                                                      task_queue: str) -> None:
    agent = TemporalAgent(Agent(model=ScriptedModel(["Final Answer: one", act("Oslo")]),
                                tools=[slow]),
                          dev_env.client, task_queue=task_queue)
    worker = await serving(agent)
    try:
        await agent.arun("q1", session_id="turns-terminated")
        started.clear()
        second = asyncio.ensure_future(agent.arun("q2", session_id="turns-terminated"))
        await asyncio.wait_for(started.wait(), 30)
        await dev_env.client.get_workflow_handle("turns-terminated").terminate(reason="a person")
        assert (await asyncio.wait_for(second, 30)).status == "cancelled"
        with pytest.raises(TurnRefused, match="was cancelled"):
            await agent.arun("q3", session_id="turns-terminated")
    finally:
        await worker.shutdown()

"""``TemporalAgent.astream`` / ``stream``: the workflow's event log as an iterator; leaving the
loop stops following (the workflow goes on) and ``resume`` follows it to its end."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, ScriptedModel, tool
from miniagent.core.runtime import events as ev
from miniagent.temporal import TemporalAgent, agent_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")


@tool
async def slow_add(a: int, b: int) -> int:
    """Add two integers, slowly."""
    await asyncio.sleep(0.5)
    return a + b


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@contextlib.asynccontextmanager
async def served(env: WorkflowEnvironment, model: ScriptedModel, tools: list[object]
                 ) -> AsyncIterator[TemporalAgent]:
    agent = TemporalAgent(Agent(model=model, tools=tools), env.client,  # type: ignore[arg-type]
                          task_queue=f"stream-{uuid.uuid4().hex[:12]}")
    worker = await agent_worker(agent)
    serving = asyncio.ensure_future(worker.run())
    try:
        yield agent
    finally:
        await worker.shutdown()
        await asyncio.wait({serving})
        await agent.aclose()


async def test_leaving_the_stream_stops_following_and_resume_follows_to_the_end(
        dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(['Action: slow_add\nAction Input: {"a": 2, "b": 3}',
                           "Final Answer: 5"])
    async with served(dev_env, model, [slow_add]) as agent:
        async with contextlib.aclosing(agent.astream("2+3?")) as events:
            async for event in events:
                if event.kind == "tool_started":
                    break
        result = await agent.aresume(event.session_id)
    assert (result.status, result.final_answer) == ("completed", "5")


async def test_a_session_that_waits_for_a_person_ends_the_stream_with_its_result(
        dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(['Action: pay\nAction Input: {"amount": 7}', "Final Answer: paid"])
    async with served(dev_env, model, [pay]) as agent:
        events = [event async for event in agent.astream("pay 7")]
        last = events[-1]
        assert isinstance(last, ev.RunFinished)
        assert last.result.status == "awaiting_approval"
        assert [p.tool for p in last.result.pending_approvals] == ["pay"]
        assert "approval_requested" in [e.kind for e in events]
        await agent.aapprove(last.session_id)
        resumed = await agent.aresume(last.session_id)
    assert (resumed.status, resumed.final_answer) == ("completed", "paid")

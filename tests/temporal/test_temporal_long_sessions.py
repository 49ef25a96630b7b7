"""Time and size: a 24 h approval wait under time skipping, and a 300-step session with 4 KB
observations that continues as new and completes."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from temporal_helpers import act, wait_status
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, AgentSpec, Limits, ModelSettings, ScriptedModel, tool
from miniagent.core.types import ModelRequest
from miniagent.temporal import TemporalAgent, TemporalSessions, agent_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")
DAY = 24 * 3600
ran: list[int] = []


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay someone; a person must approve."""
    ran.append(amount)
    return f"paid {amount}"


def pay_script() -> ScriptedModel:
    return ScriptedModel([act("pay", {"amount": 5}), "Final Answer: settled"])


async def test_approval_after_a_day_with_time_skipping(skip_env: WorkflowEnvironment,
                                                       task_queue: str) -> None:
    ran.clear()
    agent = TemporalAgent(Agent(model=pay_script(), tools=[pay]), skip_env.client,
                          task_queue=task_queue)
    sessions = TemporalSessions(skip_env.client, task_queue)
    async with await agent_worker(agent):
        spec = AgentSpec(limits=Limits(approval_timeout=3 * DAY))
        session_id = await sessions.start("pay", spec)
        await wait_status(sessions, session_id, "awaiting_approval")
        await skip_env.sleep(timedelta(hours=24))
        view = await sessions.view(session_id)
        assert view.status == "awaiting_approval" and ran == []
        assert await sessions.decide(session_id, True) == [view.pending[0].call_id]
        result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "settled") and ran == [5]
    approved = next(m for m in result.steps[0].calls[0].moves if m.target == "approved")
    session = result.steps[0].calls[0].moves[0]
    assert approved.at - session.at >= DAY  # a day passed on the workflow's clock


async def test_unanswered_approval_is_denied_after_its_timeout(
        skip_env: WorkflowEnvironment, task_queue: str) -> None:
    ran.clear()
    agent = TemporalAgent(Agent(model=pay_script(), tools=[pay]), skip_env.client,
                          task_queue=task_queue)
    sessions = TemporalSessions(skip_env.client, task_queue)
    async with await agent_worker(agent):
        session_id = await sessions.start("pay", AgentSpec(limits=Limits(approval_timeout=DAY)))
        result = await sessions.result(session_id)  # the test server skips the day at once
    assert result.status == "completed" and ran == []
    observation = result.steps[0].calls[0].observation
    assert observation is not None and f"no decision within {DAY} s" in observation.output


@tool
def page(n: int) -> str:
    """Read page n of a long document (4 KB)."""
    seed = hashlib.sha256(str(n).encode()).hexdigest()
    return "".join(hashlib.sha256(f"{seed}{i}".encode()).hexdigest() for i in range(64))


def reader(request: ModelRequest) -> str:
    read = sum(1 for m in request.messages if m["role"] == "user") - 1
    return act("page", {"n": read}) if read < 299 else "Final Answer: read 299 pages"


async def test_300_steps_of_4kb_continue_as_new_and_complete(
        dev_env: WorkflowEnvironment, task_queue: str) -> None:
    agent = TemporalAgent(Agent(model=ScriptedModel([reader] * 300), tools=[page],
                                model_settings=ModelSettings(grammar=False),
                                limits=Limits(max_steps=300, max_observation_chars=5000)),
                          dev_env.client, task_queue=task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    async with await agent_worker(agent):
        result = await agent.arun("read every page")
        view = await sessions.view(result.session_id)
        session = await sessions.session(result.session_id)
    assert (result.status, result.final_answer) == ("completed", "read 299 pages")
    assert view.runs > 1  # it continued as new, carrying the session
    assert len(session.steps) == 300
    observations: list[Any] = [s.calls[0].observation for s in session.steps[:-1]]
    assert all(len(o.output) == 4096 for o in observations)
    assert observations[123].output == page(123)


async def test_a_payload_over_the_limit_fails_with_a_clear_status(
        skip_env: WorkflowEnvironment, task_queue: str) -> None:
    huge = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(50_000))
    agent = TemporalAgent(Agent(model=ScriptedModel([f"Thought: {huge}\nFinal Answer: no"]),
                                tools=[page]),
                          skip_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        result = await agent.arun("say a lot")
    assert result.status == "error"
    assert "over what one Temporal payload can carry" in result.reason


def noise(size: int) -> str:
    """Text that does not compress (the codec would shrink repeated text under the limit)."""
    return "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(size // 64))


async def test_a_tool_result_over_the_limit_ends_the_run_clearly(
        skip_env: WorkflowEnvironment, task_queue: str) -> None:
    ran: list[int] = []

    @tool(idempotent=False)
    def dump(n: int) -> str:
        """Produce a lot of text."""
        ran.append(n)
        return noise(3_000_000)

    agent = TemporalAgent(Agent(model=ScriptedModel([act("dump", {"n": 1}), "Final Answer: x"]),
                                tools=[dump], limits=Limits(max_observation_chars=10_000_000)),
                          skip_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        result = await agent.arun("dump it")
    assert (result.status, ran) == ("error", [1])  # ended, not parked as interrupted
    assert "the result of call" in result.reason and "payload" in result.reason


async def test_tool_call_arguments_over_the_limit_are_not_paid_for_five_times(
        skip_env: WorkflowEnvironment, task_queue: str) -> None:
    model = ScriptedModel([{"content": None, "tool_calls": [
        {"name": "page", "arguments": {"n": 1, "pad": noise(3_000_000)}}]}] * 5,
        tool_mode="native")
    agent = TemporalAgent(Agent(model=model, tools=[page]), skip_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        result = await agent.arun("big arguments")
    assert result.status == "error" and "payload" in result.reason
    assert len(model.requests) == 1


async def test_a_question_over_the_limit_is_a_result_not_an_exception(
        skip_env: WorkflowEnvironment, task_queue: str) -> None:
    agent = TemporalAgent(Agent(model=ScriptedModel(["Final Answer: x"])), skip_env.client,
                          task_queue=task_queue)
    async with await agent_worker(agent):
        result = await agent.arun(noise(3_000_000))
    assert result.status == "error" and "over Temporal's" in result.reason

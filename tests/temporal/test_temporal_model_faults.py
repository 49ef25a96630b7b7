"""Model calls as activities against a real stub server: Temporal retries what the HTTP
transport's classification says is worth retrying (429 after its Retry-After, 5xx), not other
4xx, and the HTTP client's own retries are off inside the activity."""

from __future__ import annotations

import time

import pytest
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, tool
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.temporal import TemporalAgent, agent_worker
from miniagent.testing.stub_server import Fault, StubServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def agent_on(env: WorkflowEnvironment, stub: StubServer, task_queue: str) -> TemporalAgent:
    model = OpenAICompatibleModel(base_url=stub.base_url, model="stub", tool_mode="react",
                                  max_retries=3, backoff_base=0.01)
    return TemporalAgent(Agent(model=model, tools=[noop]), env.client, task_queue=task_queue)


async def test_429_is_retried_after_its_retry_after(dev_env: WorkflowEnvironment,
                                                    task_queue: str) -> None:
    replies = [Fault(status=429, headers={"Retry-After": "2"}), "Final Answer: after a wait"]
    async with StubServer(replies) as stub:
        agent = agent_on(dev_env, stub, task_queue)
        async with await agent_worker(agent):
            started = time.monotonic()
            result = await agent.arun("hello")
            waited = time.monotonic() - started
        assert (result.status, result.final_answer) == ("completed", "after a wait")
        assert len(stub.requests) == 2  # one 429, one answer: no retry of the client's own
    assert waited >= 2.0  # Temporal's next attempt came after the server's Retry-After


async def test_400_is_not_retried(dev_env: WorkflowEnvironment, task_queue: str) -> None:
    replies = [Fault(status=400, body={"error": {"message": "bad request"}}), "Final Answer: x"]
    async with StubServer(replies) as stub:
        agent = agent_on(dev_env, stub, task_queue)
        async with await agent_worker(agent):
            result = await agent.arun("hello")
        assert result.status == "error" and "400" in result.reason
        assert "bad request" in result.reason
        assert len(stub.requests) == 1


async def test_5xx_retried_up_to_the_policy_only(dev_env: WorkflowEnvironment,
                                                 task_queue: str) -> None:
    async with StubServer([Fault(status=503)] * 10) as stub:
        agent = agent_on(dev_env, stub, task_queue)
        async with await agent_worker(agent):
            from miniagent.temporal import TemporalOptions, TemporalSessions

            sessions = TemporalSessions(dev_env.client, task_queue)
            session_id = await sessions.start("hello", agent.spec,
                                              options=TemporalOptions(model_attempts=2))
            result = await sessions.result(session_id)
        assert result.status == "error" and "503" in result.reason
        assert len(stub.requests) == 2  # two attempts by Temporal, none by the HTTP client


async def test_auto_falls_back_to_react_when_the_server_refuses_tools(
        dev_env: WorkflowEnvironment, task_queue: str) -> None:
    async with StubServer(["Final Answer: plain text it is"], reject_tools=True) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="stub", tool_mode="auto")
        agent = TemporalAgent(Agent(model=model, tools=[noop]), dev_env.client,
                              task_queue=task_queue)
        async with await agent_worker(agent):
            result = await agent.arun("hello")
        assert (result.status, result.final_answer) == ("completed", "plain text it is")
        assert [bool(r.get("tools")) for r in stub.requests] == [True, False]

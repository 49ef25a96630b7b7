"""The same agent, in process and on Temporal: the same answer and the same trace."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from miniagent import Agent, Aids, Compression, Limits, ScriptedModel, tool
from miniagent.core.models.base import Capabilities
from miniagent.core.types import RunResult
from miniagent.temporal import (
    TemporalAgent,
    TemporalSessions,
    agent_worker,
    data_converter,
    workers,
)
from miniagent.temporal import workflow as workflow_module
from miniagent.temporal.worker import sandbox
from miniagent.temporal.workflow import SessionWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(idempotent=True)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper() + "！"


def script() -> list[Any]:
    return [
        {"content": "adding", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 2, "b": "3"}'}}]},
        {"content": None, "tool_calls": [
            {"id": "c2", "type": "function",
             "function": {"name": "shout", "arguments": '{"text": "五 is five"}'}}]},
        {"content": "The sum is 5; 五 IS FIVE！"},
    ]


def trace(result: RunResult) -> list[Any]:
    """What a run did, without times: thoughts, outputs, calls, states, observations."""
    return [(s.index, s.thought, s.raw_output, s.final_answer, s.error,
             [(r.call.id, r.call.name, r.call.arguments, r.state, r.observation.output
               if r.observation else None, [(m.source, m.target) for m in r.moves])
              for r in s.calls]) for s in result.steps]


async def test_two_tool_session_same_answer_and_trace(dev_env: WorkflowEnvironment,
                                                      task_queue: str) -> None:
    local = await Agent(model=ScriptedModel(script(), tool_mode="native"),
                        tools=[add, shout]).arun("add, then shout")
    agent = TemporalAgent(Agent(model=ScriptedModel(script(), tool_mode="native"),
                                tools=[add, shout]),
                          dev_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        remote = await agent.arun("add, then shout")
        session = await TemporalSessions(dev_env.client, task_queue).session(remote.session_id)
    assert (remote.status, remote.final_answer) == ("completed", "The sum is 5; 五 IS FIVE！")
    assert (local.status, local.final_answer) == (remote.status, remote.final_answer)
    assert remote.messages == local.messages
    assert trace(remote) == trace(local)
    assert session.steps[1].calls[0].observation is not None
    assert session.steps[1].calls[0].observation.output == "五 IS FIVE！"
    assert [t.target for t in session.transitions] == ["completed"]


@tool
def weather(city: str) -> str:
    """Current weather and forecast of a city."""
    return f"{city}: 18 C"


@tool
def share_price(company: str) -> str:
    """Latest share price of a listed company."""
    return "12"


@tool
def recipe(dish: str) -> str:
    """Cooking recipe for a dish."""
    return "boil"


async def test_tool_selection_offers_the_same_tools_on_temporal(
        dev_env: WorkflowEnvironment, task_queue: str) -> None:
    def selection_script() -> list[Any]:
        return [{"content": None, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
                {"content": "Oslo: 18 C"}]

    tools = [add, shout, weather, share_price, recipe]
    local_model = ScriptedModel(selection_script(), tool_mode="native")
    local = await Agent(model=local_model, tools=tools, aids=Aids(tool_selection=2)).arun(
        "What is the weather forecast in Oslo?")
    model = ScriptedModel(selection_script(), tool_mode="native")
    agent = TemporalAgent(Agent(model=model, tools=tools, aids=Aids(tool_selection=2)),
                          dev_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        remote = await agent.arun("What is the weather forecast in Oslo?")
    assert (remote.status, remote.final_answer) == ("completed", "Oslo: 18 C")
    offered = [s.offered_tools for s in remote.steps]
    assert offered == [s.offered_tools for s in local.steps]
    assert offered[0] is not None and len(offered[0]) == 2 and "weather" in offered[0]
    sent = [[t["function"]["name"] for t in r.tools or []] for r in model.requests]
    assert sent == offered


async def test_compression_and_tool_choice_work_the_same_on_temporal(
        dev_env: WorkflowEnvironment, task_queue: str) -> None:
    """A long run compacts its history at the same steps, and a required tool_choice reaches the
    model, on Temporal as in process."""
    def long_script() -> list[Any]:
        calls = [{"content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function",
             "function": {"name": "shout", "arguments": '{"text": "' + f"word{n} " * 60 + '"}'}}]}
            for n in range(8)]
        return [*calls, {"content": "shouted 8 times"}]

    settings: dict[str, Any] = dict(compression=Compression(at=600, keep_last=2),
                                    aids=Aids(tool_choice="required"))
    local_model = ScriptedModel(long_script(), tool_mode="native")
    local_agent = Agent(model=local_model, tools=[shout], limits=Limits(max_steps=12), **settings)
    local = await local_agent.arun("shout a lot")
    model = ScriptedModel(long_script(), tool_mode="native")
    agent = TemporalAgent(Agent(model=model, tools=[shout], limits=Limits(max_steps=12),
                                **settings),
                          dev_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        remote = await agent.arun("shout a lot")
        session = await TemporalSessions(dev_env.client, task_queue).session(remote.session_id)
    assert (remote.status, remote.final_answer) == ("completed", "shouted 8 times")
    local_session = local_agent.session(local.session_id)
    assert local_session.compactions, "the run was long enough to compact"
    assert ([(c.step, c.start, c.end) for c in session.compactions]
            == [(c.step, c.start, c.end) for c in local_session.compactions])
    assert [r.messages for r in model.requests] == [r.messages for r in local_model.requests]
    assert model.requests[0].tool_choice == "required"
    assert model.requests[1].tool_choice in (None, "auto")


async def test_a_protocol_a_worker_cannot_rebuild_is_refused_at_start(
        dev_env: WorkflowEnvironment, task_queue: str) -> None:
    from miniagent.core.errors import UserError
    from miniagent.core.protocol.react import ReactProtocol

    class Shouty(ReactProtocol):
        """Named 'react' (inherited), but not the ReactProtocol a worker would build."""

    agent = TemporalAgent(Agent(model=ScriptedModel(["Final Answer: hi"]), protocol=Shouty()),
                          dev_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        with pytest.raises(UserError, match="protocol Shouty cannot run on Temporal: its name "
                                            "'react' builds ReactProtocol"):
            await agent.arun("hello")


class SmallModel(ScriptedModel):
    """A scripted model that says it is small and takes a grammar (as the embedded SmolLM2
    does)."""

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, small_model=True, grammar=True)


async def test_a_client_without_the_model_gets_the_aids_of_the_workers_small_model(
        dev_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``miniagent run --temporal`` builds its agent without the model, which is the workers':
    the aids left to their defaults follow that model, as in process."""
    questions = ("What is the capital of Italy?", "What is the weather forecast in Oslo?")
    replies = ["Final Answer: Rome", 'Action: weather\nAction Input: {"city": "Oslo"}',
               "Final Answer: Oslo: 18 C"]
    local_model = SmallModel(list(replies))
    local = Agent(model=local_model, tools=[weather, add])
    for question in questions:
        assert (await local.arun(question)).status == "completed"
    served = SmallModel(list(replies))
    async with await agent_worker(TemporalAgent(Agent(model=served, tools=[weather, add]),
                                                dev_env.client, task_queue=task_queue)):
        client = TemporalAgent(Agent(), dev_env.client, task_queue=task_queue)  # no model here
        assert client.spec.strict_selection is False  # not decided here: by the workers'
        for question in questions:
            remote = await client.arun(question)
            assert remote.status == "completed", remote.reason
    assert remote.final_answer == "Oslo: 18 C"
    assert "Tools: none." in served.requests[0].messages[0]["content"]  # strict selection
    assert "Valid tool names: weather\n" in served.requests[1].messages[0]["content"]
    assert served.requests[2].grammar and "quote-" in served.requests[2].grammar
    assert [r.messages for r in served.requests] == [r.messages for r in local_model.requests]
    assert [r.grammar for r in served.requests] == [r.grammar for r in local_model.requests]
    # the worker's answer is in the history: a replay decides the same on a worker whose
    # model is not small (the replayer's task queue is its own: it is served the same tools)
    history = await dev_env.client.get_workflow_handle(remote.session_id).fetch_history()
    tools = workers.served(task_queue)
    monkeypatch.setattr(workflow_module, "served", lambda _queue: tools)
    replayed = await Replayer(workflows=[SessionWorkflow], data_converter=data_converter(),
                              workflow_runner=sandbox()).replay_workflow(
        history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure

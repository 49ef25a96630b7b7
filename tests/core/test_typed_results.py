"""Typed results (issue 35, item 1) over real HTTP: what the stub server received for each
protocol, the repair of an answer that does not fit, and clear errors for a bad output type."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from miniagent import Agent, OpenAICompatibleModel, ScriptedModel
from miniagent.core.errors import UserError
from miniagent.core.runtime.output import FINAL_RESULT, OUTPUT_RETRIES
from miniagent.testing.stub_server import StubServer


class Invoice(BaseModel):
    number: str
    total: float


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    key: str
    value: int


def model(stub: StubServer, **options: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=stub.base_url, model="m", max_retries=0, **options)


def test_native_with_response_format_sends_the_schema() -> None:
    with StubServer(['{"number": "A-7", "total": 12.5}']).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native", response_format=True),
                      output_type=Invoice)
        result = agent.run("Read the invoice")
    assert result.status == "completed"
    assert result.output == Invoice(number="A-7", total=12.5)
    assert result.final_answer == '{"number": "A-7", "total": 12.5}'
    sent = stub.requests[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["schema"]["required"] == ["number", "total"]
    assert "tools" not in stub.requests[0]


def test_native_without_response_format_offers_a_final_result_tool() -> None:
    replies = [{"tool_calls": [{"name": FINAL_RESULT, "arguments": {"number": "A-7"}}],
                "content": None},
               {"tool_calls": [{"name": FINAL_RESULT,
                                "arguments": {"number": "A-7", "total": 3}}], "content": None}]
    with StubServer(replies).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native"), output_type=Invoice)
        result = agent.run("Read the invoice")
    assert (result.status, result.output) == ("completed", Invoice(number="A-7", total=3))
    first, second = stub.requests
    assert "response_format" not in first
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert offered[FINAL_RESULT]["required"] == ["number", "total"]
    # the refusal is the result of the model's own call: it repairs from it
    repair = second["messages"][-1]
    assert repair["role"] == "tool" and "'total' is a required property" in repair["content"]
    assert repair["tool_call_id"] == second["messages"][-2]["tool_calls"][0]["id"]


def test_react_over_http_asks_for_the_schema_in_the_prompt_and_repairs() -> None:
    replies = ["Thought: done\nFinal Answer: an invoice A-7 of 12.5",
               'Thought: as JSON\nFinal Answer: {"number": "A-7", "total": 12.5}']
    with StubServer(replies).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react"))
        result = agent.run("Read the invoice", output_type=Invoice)
    assert (result.status, result.output) == ("completed", Invoice(number="A-7", total=12.5))
    system = stub.requests[0]["messages"][0]["content"]
    assert '"required":["number","total"]' in system
    repair = stub.requests[1]["messages"][-1]
    assert repair["role"] == "user" and "it is not JSON" in repair["content"]


def test_react_with_a_grammar_server_gets_the_schema_as_the_final_answer_grammar() -> None:
    with StubServer(['Thought: ok\nFinal Answer: {"x": 1, "y": 2}']).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react", grammar_field="grammar"),
                      output_type=Point)
        result = agent.run("Where?")
    assert result.output == Point(x=1, y=2)
    grammar = stub.requests[0]["grammar"]
    final = next(line for line in grammar.splitlines() if line.startswith("final ::="))
    assert final.startswith('final ::= "Final Answer: " ')
    assert '"\\"x\\""' in grammar.replace(" ", "") or '\\"x\\"' in grammar


def test_answers_that_never_fit_end_the_run_with_an_error() -> None:
    bad = "Thought: t\nFinal Answer: {\"key\": 1}"
    agent = Agent(model=ScriptedModel([bad] * (OUTPUT_RETRIES + 1)), output_type=Pair)
    result = agent.run("A pair?")
    assert result.status == "error"
    assert "does not fit the output schema" in result.reason
    assert f"after {OUTPUT_RETRIES} repairs" in result.reason
    assert result.output is None and result.final_answer is None


def test_a_schema_dict_gives_the_json_value_and_no_type_gives_none() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    typed = Agent(model=ScriptedModel(['Final Answer: {"ok": true}']), output_type=schema)
    assert typed.run("ok?").output == {"ok": True}
    plain = Agent(model=ScriptedModel(["Final Answer: yes"])).run("ok?")
    assert (plain.final_answer, plain.output) == ("yes", None)


def test_a_per_run_type_replaces_the_agents_and_the_next_turn_is_free_again() -> None:
    agent = Agent(model=ScriptedModel(['Final Answer: {"x": 1, "y": 2}', "Final Answer: hi"]))
    first = agent.run("Where?", output_type=Point)
    second = agent.run("Say hi", session_id=first.session_id)
    assert (first.output, second.final_answer, second.output) == (Point(x=1, y=2), "hi", None)


def test_a_stream_ends_with_the_typed_result() -> None:
    agent = Agent(model=ScriptedModel(['Final Answer: {"x": 3, "y": 4}']), output_type=Point)
    events = list(agent.stream("Where?"))
    assert events[-1].result.output == Point(x=3, y=4)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("output_type", "says"), [
    (object(), "has no JSON Schema"),
    ({"type": "no-such-type"}, "not a valid JSON Schema"),
])
def test_a_bad_output_type_is_a_clear_error(output_type: Any, says: str) -> None:
    with pytest.raises(UserError, match=says):
        Agent(model=ScriptedModel([]), output_type=output_type)
    with pytest.raises(UserError, match=says):
        Agent(model=ScriptedModel([])).run("?", output_type=output_type)


def test_a_fenced_answer_is_read() -> None:
    answer = 'Final Answer: ```json\n{"x": 5, "y": 6}\n```'
    result = Agent(model=ScriptedModel([answer]), output_type=Point).run("Where?")
    assert result.output == Point(x=5, y=6)
    assert json.loads(result.final_answer.strip("`json\n")) == {"x": 5, "y": 6}  # type: ignore[union-attr]


class HeldModel(ScriptedModel):
    """Its second reply waits until ``open``: the run stays in that call until cancelled."""

    open = False

    async def generate(self, request: Any) -> Any:
        while not self.open and len(self.requests) >= 1:
            await asyncio.sleep(0.01)  # bounded by the stream's cancel
        return await super().generate(request)


async def test_leaving_a_typed_stream_early_cancels_the_run_and_resume_types_it() -> None:
    model = HeldModel(['Final Answer: {"x": 1}', 'Final Answer: {"x": 1, "y": 2}'])
    agent = Agent(model=model, output_type=Point)
    async with contextlib.aclosing(agent.astream("Where?")) as events:
        async for event in events:
            if event.kind == "model_started" and event.step == 2:
                break  # the repaired answer is held
    assert agent.session(event.session_id).status == "running"  # resumable, lease released
    model.open = True
    resumed = await agent.aresume(event.session_id)
    assert (resumed.status, resumed.output) == ("completed", Point(x=1, y=2))
    await agent.aclose()


def test_a_tool_named_final_result_is_refused_for_a_typed_agent() -> None:
    from miniagent import tool

    @tool(name=FINAL_RESULT)
    def mine(text: str) -> str:
        """Mine."""
        return text

    agent = Agent(model=ScriptedModel(["Final Answer: {}"]), tools=[mine], output_type=Point)
    with pytest.raises(UserError, match="named 'final_result'"):
        agent.run("?")

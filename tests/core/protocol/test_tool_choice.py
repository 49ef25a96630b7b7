"""tool_choice in every mode: what the model or the server received, and how the run went."""

from __future__ import annotations

from typing import Any

import pytest
from gbnf_match import accepts

from miniagent import Agent, Aids, ModelSettings, OpenAICompatibleModel, ScriptedModel, tool
from miniagent.core.errors import UserError
from miniagent.core.protocol.grammar import react_grammar
from miniagent.testing.stub_server import StubServer


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


ACTION = 'Thought: add\nAction: add\nAction Input: {"a": 2, "b": 3}'
ECHO = 'Thought: echo\nAction: echo\nAction Input: {"text": "hi"}'
FINAL = "Thought: done\nFinal Answer: 5"


def _native_call(name: str = "add", **arguments: Any) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": name, "arguments": arguments or {"a": 2, "b": 3}}}]}


# -- ReAct: the grammar -------------------------------------------------------------------


async def test_react_required_grammar_forbids_a_final_answer_then_returns_to_auto() -> None:
    model = ScriptedModel([ACTION, FINAL], grammar=True)
    result = await Agent(model=model, tools=[add, echo],
                         aids=Aids(tool_choice="required")).arun("2+3?")
    assert (result.status, result.final_answer) == ("completed", "5")
    first, second = (r.grammar or "" for r in model.requests)
    assert accepts(first, ACTION) and accepts(first, ECHO)
    assert not accepts(first, FINAL)
    assert second == react_grammar([add, echo])  # auto again after the first call
    assert accepts(second, FINAL)


async def test_react_named_tool_grammar_admits_only_that_tool() -> None:
    model = ScriptedModel([ECHO, FINAL], grammar=True)
    result = await Agent(model=model, tools=[add, echo],
                         aids=Aids(tool_choice="echo")).arun("say hi")
    assert result.steps[0].observations[0].output == "hi"
    first = model.requests[0].grammar or ""
    assert accepts(first, ECHO)
    assert not accepts(first, ACTION) and not accepts(first, FINAL)


async def test_react_none_grammar_admits_only_a_final_answer_on_every_step() -> None:
    model = ScriptedModel([FINAL], grammar=True)
    result = await Agent(model=model, tools=[add], aids=Aids(tool_choice="none")).arun("2+3?")
    assert result.final_answer == "5"
    grammar = model.requests[0].grammar or ""
    assert accepts(grammar, FINAL) and not accepts(grammar, ACTION)


async def test_required_holds_against_a_model_that_answers_from_memory() -> None:
    """No grammar (a backend without constrained decoding): the answer is refused and the
    model is told a tool is needed; it calls the tool, and may answer afterwards."""
    model = ScriptedModel(["Thought: I know\nFinal Answer: 6", ACTION, FINAL])
    agent = Agent(model=model, tools=[add], aids=Aids(tool_choice="required"),
                  model_settings=ModelSettings(grammar=False))
    result = await agent.arun("2+3?")
    assert (result.status, result.final_answer) == ("completed", "5")
    assert result.steps[0].error == "this step must call a tool before any final answer"
    told = model.requests[1].messages[-1]["content"]
    assert "must call a tool" in told and "Action Input" in told
    assert result.steps[1].observations[0].output == "5"
    assert [r.grammar for r in model.requests] == [None, None, None]


async def test_a_named_choice_refuses_a_call_of_another_tool() -> None:
    model = ScriptedModel([ACTION, ECHO, "Final Answer: hi"])
    result = await Agent(model=model, tools=[add, echo], aids=Aids(tool_choice="echo"),
                         model_settings=ModelSettings(grammar=False)).arun("say hi")
    assert result.final_answer == "hi"
    assert result.steps[0].error == "this step must call the tool 'echo', not add"
    assert not result.steps[0].calls
    assert result.steps[1].observations[0].output == "hi"


async def test_none_refuses_a_tool_call() -> None:
    model = ScriptedModel([ACTION, FINAL])
    result = await Agent(model=model, tools=[add], aids=Aids(tool_choice="none"),
                         model_settings=ModelSettings(grammar=False)).arun("q")
    assert result.final_answer == "5"
    assert result.steps[0].error is not None and "no tool may be called" in result.steps[0].error
    assert not result.steps[0].calls  # the tool never ran


# -- native: the field, as the server received it ------------------------------------------


@pytest.mark.parametrize(("choice", "sent"), [
    ("required", ["required", "auto"]),
    ("add", [{"type": "function", "function": {"name": "add"}}, "auto"]),
    ("auto", ["auto", "auto"]),
])
async def test_native_tool_choice_field_as_the_server_received_it(choice: str,
                                                                  sent: list[Any]) -> None:
    async with StubServer([_native_call(), "It is 5."]) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, tool_mode="native", max_retries=0)
        result = await Agent(model=model, tools=[add, echo],
                             aids=Aids(tool_choice=choice)).arun("2+3?")
        await model.aclose()
    assert (result.status, result.final_answer) == ("completed", "It is 5.")
    assert [r["tool_choice"] for r in stub.requests] == sent


async def test_native_none_is_sent_on_every_step_and_no_choice_sends_auto() -> None:
    async with StubServer(["5", "6"]) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, tool_mode="native", max_retries=0)
        await Agent(model=model, tools=[add], aids=Aids(tool_choice="none")).arun("q")
        await Agent(model=model, tools=[add]).arun("q")
        await model.aclose()
    assert stub.requests[0]["tool_choice"] == "none"
    assert stub.requests[1]["tool_choice"] == "auto"  # some servers ignore tools without it


async def test_native_required_with_a_server_that_ignores_it() -> None:
    model = ScriptedModel(["5 from memory", _native_call(), "It is 5."], tool_mode="native")
    result = await Agent(model=model, tools=[add], aids=Aids(tool_choice="required")).arun("2+3?")
    assert result.final_answer == "It is 5."
    assert [r.tool_choice for r in model.requests] == ["required", "required", "auto"]
    assert result.steps[1].observations[0].output == "5"


# -- configuration ------------------------------------------------------------------------


def test_an_unknown_tool_name_or_an_empty_choice_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not among the run's tools"):
        Agent(model=ScriptedModel([]), tools=[add], aids=Aids(tool_choice="search"))
    with pytest.raises(UserError, match="tool_choice must be"):
        Agent(model=ScriptedModel([]), tools=[add], aids=Aids(tool_choice="  "))

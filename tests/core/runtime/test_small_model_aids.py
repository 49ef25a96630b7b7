"""Aids for small models: a worked example in the ReAct prompt, a small tool selection, and
the answer that follows a repeat intervention; on by default only where a model says it is
small, each one can be set either way."""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

import pytest

from miniagent import Agent, Aids, Limits, tool
from miniagent.core.errors import UserError
from miniagent.core.models.base import Capabilities
from miniagent.core.models.scripted import ScriptedModel
from miniagent.core.protocol.react import ReactProtocol, render_system_prompt, worked_example
from miniagent.core.tools.calculator import calculator
from miniagent.core.types import Message


@tool
def convert(value: float, unit: str, exact: bool = False) -> str:
    """Convert a value to another unit."""
    return f"{value} {unit}"


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: 18 °C"


@tool
def recipe(dish: str) -> str:
    """A recipe for a dish."""
    return "boil"


class SmallModel(ScriptedModel):
    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, small_model=True, grammar=True)


def test_the_example_is_built_from_the_tool_and_matches_its_schema() -> None:
    text = worked_example(convert)
    assert "Action: convert\n" in text
    assert "Thought: I should call convert with value=..., unit=...\n" in text  # names inputs
    (line,) = [ln for ln in text.splitlines() if ln.startswith("Action Input: ")]
    # the required ones, placeholders by type: no sample number a small model would copy
    assert line == 'Action Input: {"value":<number>,"unit":"..."}'
    assert text.endswith("Final Answer: the answer, taken from the Observation")


@tool
def pick(mode: Literal["fast", "exact"], count: int, flag: bool) -> str:
    """Pick."""
    return mode


def test_the_example_shows_an_enum_value_and_json_literals() -> None:
    (line,) = [ln for ln in worked_example(pick).splitlines()
               if ln.startswith("Action Input: ")]
    assert line == 'Action Input: {"mode":"fast","count":<integer>,"flag":true}'


def test_the_prompt_has_the_example_only_when_asked() -> None:
    assert "Example (only the format" not in render_system_prompt([calculator])
    shown = render_system_prompt([calculator, convert], example=True)
    assert "Action: calculator\n" in shown.split("Example (only the format")[1]
    assert "Example" not in render_system_prompt([], example=True)  # no tool, no example


OSLO = 'Thought: look it up\nAction: weather\nAction Input: {"city": "Oslo"}'


async def test_a_small_model_gets_the_aids_by_default() -> None:
    model = SmallModel([OSLO, "Final Answer: Oslo: 18 °C"])
    agent = Agent(model=model, tools=[weather, recipe, calculator, convert])
    assert agent.spec.tool_selection == 2
    assert (agent.spec.strict_selection, agent.spec.quote_answers) == (True, True)
    assert (agent.spec.limits.answer_after_results, agent.spec.act_first) == (1, False)
    result = await agent.arun("What is the weather in Oslo?")
    assert (result.status, result.final_answer) == ("completed", "Oslo: 18 °C")
    first, second = model.requests
    system = first.messages[0]["content"]
    offered = re.findall(r"^- (\w+):", system, re.MULTILINE)
    assert offered == ["weather"]  # strict: only what the question matches, no filling up
    assert "Example (only the format" in system
    assert first.grammar is not None and "Final Answer" in first.grammar  # no act_first
    assert second.grammar is not None
    assert "Action: " not in second.grammar  # one round of results: it answers now
    # the answer is a quote of the result (what the quotes admit:
    # tests/core/protocol/test_quotes.py)
    assert re.search(r'^final ::= "Final Answer: " \(quote-', second.grammar, re.MULTILINE)
    assert '::= "18" (" " quote-' in second.grammar


async def test_a_failed_call_is_no_round_and_the_model_may_repair_it() -> None:
    wrong = 'Thought: look\nAction: weather\nAction Input: {"town": "Oslo"}'
    model = SmallModel([wrong, OSLO, "Final Answer: 18 °C"])
    result = await Agent(model=model, tools=[weather]).arun("What is the weather in Oslo?")
    assert (result.status, result.final_answer) == ("completed", "18 °C")
    assert "action ::=" in (model.requests[1].grammar or "")  # after the error: may act
    assert "Action: " not in (model.requests[2].grammar or "x")  # after the result: answers


async def test_more_rounds_or_none_when_asked() -> None:
    model = SmallModel([OSLO, OSLO.replace("Oslo", "Rome"), "Final Answer: both 18 °C"])
    agent = Agent(model=model, tools=[weather], limits=Limits(answer_after_results=2))
    assert (await agent.arun("Weather in Oslo and Rome?")).final_answer == "both 18 °C"
    assert "action ::=" in (model.requests[1].grammar or "")
    assert "Action: " not in (model.requests[2].grammar or "x")
    unbounded = Agent(model=SmallModel([]), tools=[weather], limits=Limits(answer_after_results=0))
    assert unbounded.spec.limits.answer_after_results is None


async def test_act_first_asks_for_a_call_only_where_a_tool_is_offered() -> None:
    model = SmallModel([OSLO, "Final Answer: 18 °C", "Final Answer: Rome"])
    agent = Agent(model=model, tools=[weather, recipe], aids=Aids(act_first=True))
    await agent.arun("What is the weather in Oslo?")
    assert "Final Answer" not in (model.requests[0].grammar or "x")
    result = await agent.arun("What is the capital of Italy?")  # no tool matches: answer
    assert (result.status, result.final_answer) == ("completed", "Rome")


async def test_a_question_no_tool_matches_gets_no_tool_and_a_free_answer() -> None:
    model = SmallModel(["Final Answer: Rome"])
    agent = Agent(model=model, tools=[weather, recipe, calculator, convert])
    result = await agent.arun("What is the capital of Italy?")
    assert (result.status, result.final_answer) == ("completed", "Rome")
    request = model.requests[0]
    assert "Tools: none." in request.messages[0]["content"]
    assert request.grammar is not None and "Action: " not in request.grammar
    assert result.steps[0].offered_tools == []


@pytest.mark.parametrize("options", [{"tool_selection": 0, "worked_example": False,
                                      "quote_answers": False, "strict_selection": False}])
async def test_each_aid_can_be_turned_off(options: dict[str, object]) -> None:
    model = SmallModel(["Final Answer: sunny"])
    agent = Agent(model=model, tools=[weather, recipe, calculator],
                  aids=Aids(**options))  # type: ignore[arg-type]
    assert agent.spec.tool_selection is None
    await agent.arun("What is the weather in Oslo?")
    request = model.requests[0]
    system = request.messages[0]["content"]
    assert len(re.findall(r"^- (\w+):", system, re.MULTILINE)) == 3
    assert "Example (only the format" not in system
    assert "Final Answer" in (request.grammar or "")


async def test_strict_selection_alone_offers_every_matching_tool() -> None:
    model = ScriptedModel(["Final Answer: Rome", "Final Answer: sunny"])
    agent = Agent(model=model, tools=[weather, recipe, calculator],
                  aids=Aids(strict_selection=True))
    await agent.arun("What is the capital of Italy?")
    await agent.arun("What is the weather like, and a recipe for pasta?")
    first, second = (r.messages[0]["content"] for r in model.requests)
    assert re.findall(r"^- (\w+):", first, re.MULTILINE) == []
    assert sorted(re.findall(r"^- (\w+):", second, re.MULTILINE)) == ["recipe", "weather"]


async def test_a_required_choice_keeps_tools_to_choose_from() -> None:
    """Strict selection would offer nothing to a question no tool matches, and a required
    call could then never be made: the selection fills its places instead."""
    model = SmallModel([OSLO, "Final Answer: Oslo: 18 °C"])
    agent = Agent(model=model, tools=[weather, recipe], aids=Aids(tool_choice="required"),
                  limits=Limits(max_steps=3))
    result = await agent.arun("What is the capital of Italy?")
    assert (result.status, [c.name for s in result.steps for c in s.tool_calls]) == (
        "completed", ["weather"])
    assert result.steps[0].offered_tools == ["weather", "recipe"]


async def test_strict_selection_can_be_turned_off() -> None:
    model = SmallModel(["Final Answer: Rome"])
    agent = Agent(model=model, tools=[weather, recipe, calculator],
                  aids=Aids(strict_selection=False))
    await agent.arun("What is the capital of Italy?")
    system = model.requests[0].messages[0]["content"]
    assert len(re.findall(r"^- (\w+):", system, re.MULTILINE)) == 2  # filled up to 2


async def test_other_models_get_none_unless_asked() -> None:
    model = ScriptedModel(["Final Answer: sunny", "Final Answer: sunny"])
    plain = Agent(model=model, tools=[weather, recipe, calculator])
    assert plain.spec.tool_selection is None
    assert not (plain.spec.strict_selection or plain.spec.act_first or plain.spec.quote_answers)
    assert plain.spec.limits.answer_after_results is None
    await plain.arun("weather?")
    assert "Example (only the format" not in model.requests[0].messages[0]["content"]
    asked = Agent(model=model, tools=[weather, recipe], aids=Aids(worked_example=True))
    await asked.arun("weather?")
    assert "Example (only the format" in model.requests[1].messages[0]["content"]


def test_a_negative_selection_is_refused() -> None:
    with pytest.raises(UserError, match="tool_selection must be at least 0"):
        Agent(model=ScriptedModel([]), aids=Aids(tool_selection=-1))
    with pytest.raises(UserError, match="answer_after_results must be at least 0, got -1"):
        Agent(model=ScriptedModel([]), limits=Limits(answer_after_results=-1))


async def test_after_a_repeat_the_grammar_admits_only_the_final_answer() -> None:
    again = 'Thought: again\nAction: weather\nAction Input: {"city": "Oslo"}'
    model = ScriptedModel([again, again, "Final Answer: 18 °C"], grammar=True)
    result = await Agent(model=model, tools=[weather],
                         limits=Limits(repeat_limit=2)).arun("Weather in Oslo?")
    assert (result.status, result.final_answer) == ("completed", "18 °C")
    last = model.requests[-1]
    assert last.grammar is not None and "Action: " not in last.grammar
    assert "Final Answer: " in last.grammar
    told = last.messages[-1]["content"]
    assert "Its result was: Oslo: 18 °C" in told


async def test_the_old_behaviour_stays_available() -> None:
    again = 'Thought: again\nAction: weather\nAction Input: {"city": "Oslo"}'
    model = ScriptedModel([again] * 4, grammar=True)
    result = await Agent(model=model, tools=[weather],
                         limits=Limits(answer_after_repeat=False)).arun("Oslo?")
    assert result.status == "loop_detected"
    assert "Action: " in (model.requests[-1].grammar or "")


def test_the_protocol_option_round_trips() -> None:
    protocol = ReactProtocol(example=True)
    assert protocol.options()["example"] is True
    request = protocol.render([Message(role="user", content="hi")], [weather])
    assert "Action: weather\n" in request.messages[0]["content"]


async def test_two_steps_with_the_same_results_make_the_next_one_answer() -> None:
    first = 'Thought: compute\nAction: calculator\nAction Input: {"expression": "17 * 23"}'
    echo = 'Thought: 391\nAction: calculator\nAction Input: {"expression": "391"}'
    model = ScriptedModel([first, echo, "Final Answer: 391"], grammar=True)
    result = await Agent(model=model, tools=[calculator]).arun("What is 17 * 23?")
    assert (result.status, result.final_answer) == ("completed", "391")
    assert [call.name for step in result.steps for call in step.tool_calls] == ["calculator"] * 2
    assert "Action: " in (model.requests[1].grammar or "")  # one result: the model may go on
    assert "Action: " not in (model.requests[2].grammar or "x")  # the same again: answer


async def test_different_results_keep_the_tools_offered() -> None:
    a = 'Thought: a\nAction: weather\nAction Input: {"city": "Oslo"}'
    b = 'Thought: b\nAction: weather\nAction Input: {"city": "Rome"}'
    model = ScriptedModel([a, b, "Final Answer: both 18 °C"], grammar=True)
    result = await Agent(model=model, tools=[weather]).arun("Oslo and Rome?")
    assert result.status == "completed"
    assert "Action: " in (model.requests[2].grammar or "")


def test_an_agent_without_its_model_leaves_the_aids_it_does_not_set_to_the_model() -> None:
    """A Temporal client has no model: the aids it does not set are the workers' model's to
    decide (``with_small_model_aids`` where that model is small); those it sets, here or with
    ``spec.replace``, stay as set; an agent with its model decides them itself."""
    from miniagent.core.runtime.run import AIDS_FOR, with_small_model_aids

    client = Agent(aids=Aids(quote_answers=False))  # a Temporal client's: no model
    assert client.spec.aids_from_model == ("tool_selection", "worked_example",
                                           "strict_selection", "answer_after_results",
                                           "restate_question", "ground_figures")
    small = with_small_model_aids(client.spec)
    assert (small.tool_selection, small.strict_selection, small.quote_answers,
            small.limits.answer_after_results, small.protocol.options["example"],
            small.restate_question, small.ground_figures) == (
        AIDS_FOR[True]["tool_selection"], True, False, AIDS_FOR[True]["answer_after_results"],
        True, True, False)  # a small model's aids, but for the one only a profile turns on
    assert small.aids_from_model == ()
    changed = client.spec.replace(strict_selection=False, limits={"answer_after_results": 3})
    assert changed.aids_from_model == ("tool_selection", "worked_example", "restate_question",
                                       "ground_figures")
    decided = with_small_model_aids(changed)
    assert (decided.strict_selection, decided.limits.answer_after_results) == (False, 3)
    assert client.spec.replace(limits={"max_steps": 3}).aids_from_model == (
        client.spec.aids_from_model)  # other limits leave the aid to the model
    given = Agent(protocol=ReactProtocol())
    assert "worked_example" not in given.spec.aids_from_model  # the protocol's own
    assert Agent(model=ScriptedModel([])).spec.aids_from_model == ()


class MeasuredModel(ScriptedModel):
    """A model whose profile names the aids it was measured to need."""

    def __init__(self, aids: tuple[str, ...]) -> None:
        super().__init__(["Final Answer: 1"], grammar=True)
        self._aids = aids

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, small_model=bool(self._aids),
                                   aids=self._aids)


def _aids_of(agent: Agent) -> dict[str, object]:
    spec = agent.spec
    return {"tool_selection": spec.tool_selection, "strict_selection": spec.strict_selection,
            "quote_answers": spec.quote_answers,
            "answer_after_results": spec.limits.answer_after_results,
            "worked_example": spec.protocol.options.get("example")}


def test_a_model_gets_only_the_aids_its_profile_names() -> None:
    agent = Agent(model=MeasuredModel(("tool_selection", "answer_after_results")),
                  tools=[weather, recipe, calculator, convert])
    assert _aids_of(agent) == {"tool_selection": 2, "strict_selection": False,
                               "quote_answers": False, "answer_after_results": 1,
                               "worked_example": False}


def test_aids_on_and_off_override_the_profile_and_a_given_aid_wins() -> None:
    tools = [weather, recipe, calculator, convert]
    off = _aids_of(Agent(model=SmallModel([]), tools=tools, aids="off"))
    assert off == {"tool_selection": None, "strict_selection": False, "quote_answers": False,
                   "answer_after_results": None, "worked_example": False}
    on = _aids_of(Agent(model=MeasuredModel(()), tools=tools, aids="on"))
    assert on["strict_selection"] is True and on["worked_example"] is True
    given = _aids_of(Agent(model=SmallModel([]), tools=tools,
                           aids=Aids(preset="off", tool_selection=3)))
    assert given["tool_selection"] == 3 and given["strict_selection"] is False
    with pytest.raises(UserError, match="aids must be auto, on or off"):
        Agent(model=SmallModel([]), aids="some")  # type: ignore[arg-type]


@tool
def flaky(city: str) -> str:
    """Weather of a city, from a service that is down."""
    raise RuntimeError("service unavailable")


async def test_the_question_is_restated_after_a_result() -> None:
    """With ``restate_question`` a result ends with the question and the two ways on (the
    1.5B model otherwise went on converting the figures it had, or answered the figure of
    its last call); a failed call's error is left as it is, and without the aid nothing is
    added."""
    question = "How warm is it in Oslo, in kelvin?"
    steps = [OSLO, "Final Answer: 291.15"]
    model = ScriptedModel(list(steps))
    agent = Agent(model=model, tools=[weather], aids=Aids(restate_question=True))
    result = await agent.arun(question)
    assert result.final_answer == "291.15"
    seen = model.requests[1].messages[-1]["content"]
    assert seen == ("Observation: Oslo: 18 °C\n[The question: How warm is it in Oslo, in "
                    "kelvin?\nIf a part of it still needs a tool's result, call that tool; once "
                    "the results answer all of it, give your Final Answer.]")
    failing = ScriptedModel([OSLO.replace("weather", "flaky"), "Final Answer: unknown"])
    await Agent(model=failing, tools=[flaky], aids=Aids(restate_question=True)).arun(question)
    assert "The question:" not in failing.requests[1].messages[-1]["content"]
    plain = ScriptedModel(list(steps))
    await Agent(model=plain, tools=[weather]).arun(question)
    assert plain.requests[1].messages[-1]["content"] == "Observation: Oslo: 18 °C"


async def test_a_long_question_is_restated_cut() -> None:
    from miniagent.core.runtime.guards import RESTATED_CHARS

    model = ScriptedModel([OSLO, "Final Answer: 18"])
    await Agent(model=model, tools=[weather], aids=Aids(restate_question=True)).arun(
        "What is the weather in Oslo? " + "Some pasted text. " * 1000)
    seen = model.requests[1].messages[-1]["content"]
    assert len(seen) < RESTATED_CHARS + 200 and " ...\nIf a part of it" in seen

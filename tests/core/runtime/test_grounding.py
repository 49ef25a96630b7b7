"""The ``ground_figures`` aid: a call whose figures nothing the model was told gives is not
run, once per set of figures in a turn; small numbers, rounding and unit constants pass."""

from __future__ import annotations

from typing import Any

import pytest

from miniagent import Agent, Aids, tool
from miniagent.core.models.scripted import ScriptedModel
from miniagent.core.runtime.grounding import ungrounded_figures
from miniagent.core.tools.calculator import calculator
from miniagent.core.types import ToolCall

TEMPERATURES = {"Shanghai": 27, "Berlin": 14}


@tool
def read_lines(file_path: str, max_lines: int = 200) -> str:
    """Read lines of a file."""
    return "apples,42"


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: {TEMPERATURES[city]} °C"


def react(name: str, args: str) -> str:
    return f"Thought: I call {name}.\nAction: {name}\nAction Input: {args}"


def call(**arguments: Any) -> ToolCall:
    return ToolCall(id="c", name="calculator", arguments=arguments)


@pytest.mark.parametrize(("arguments", "told", "ungrounded"), [
    ({"expression": "27 - 14"}, ["How much warmer?", "Shanghai: 27 °C"], ("14",)),
    ({"expression": "3 + 5 + 20 + 39"}, ["Read inventory.csv and add the counts"], ("20", "39")),
    ({"expression": "12500 / 4"}, ["a quarter of the budget", "budget: 12,500 EUR"], ()),
    ({"value": 22, "from_unit": "C", "to_unit": "F"}, ["Tokyo: 21.6 °C"], ()),  # rounded
    ({"expression": "22 * 1.8 + 32"}, ["Tokyo: 22 °C"], ()),  # a conversion's constants
    ({"expression": "10 * 0.621"}, ["Convert 10 km to miles"], ()),  # a constant, rounded
    ({"expression": "1234 * 5678"}, ["What is 1234 * 5678?"], ()),
    ({"expression": "209000000 / 1000000"}, ["in millions", "Japan: 125 million ... 209000000"],
     ()),  # powers of ten
    ({"file_path": "notes.txt", "flag": True}, ["Read it"], ()),
    ({"expression": "17.5 - 3"}, ["Paris: 17 °C"], ("17.5",)),  # 17 is no rounding of 17.5
    ({"expression": "1000 / 4"}, ["A quarter of the budget in notes.txt?"], ("1000",)),
    ({"expression": "(30 - 15) * 1.8"}, ["How much warmer?"], ("30", "15", "1.8")),
    ({"expression": "2 + 2"}, ["What is two and two?"], ()),
])
def test_which_figures_are_ungrounded(arguments: dict[str, Any], told: list[str],
                                      ungrounded: tuple[str, ...]) -> None:
    assert ungrounded_figures(call(**arguments), told) == ungrounded


async def test_a_figure_never_fetched_is_fetched_first() -> None:
    """The 1.5B fetched Shanghai's 27 °C and computed ``27 - 14`` with Berlin's figure made up:
    the call is not run, the model is told which figure nothing gave, fetches it, and the
    same expression then runs on fetched figures."""
    model = ScriptedModel([react("weather", '{"city": "Shanghai"}'),
                           react("calculator", '{"expression": "27 - 14"}'),
                           react("weather", '{"city": "Berlin"}'),
                           react("calculator", '{"expression": "27 - 14"}'),
                           "Final Answer: 13"])
    agent = Agent(model=model, tools=[weather, calculator], aids=Aids(ground_figures=True))
    result = await agent.arun("How many °C warmer is Shanghai than Berlin today?")
    outputs = [o.output for step in result.steps for o in step.observations]
    assert outputs == [
        "Shanghai: 27 °C",
        "The call of 'calculator' was not run: the figure 14 appears nowhere in the question "
        "or the results so far. Fetch each figure with a tool first (or take it from an "
        "Observation); if it is right as it is, make the same call again.",
        "Berlin: 14 °C", "13"]
    assert result.final_answer == "13"


async def test_the_same_figures_again_are_let_through_and_the_aid_is_off_by_default() -> None:
    """A figure may be the model's own knowledge: each set of figures is refused once, then
    runs; without the aid the call runs at once."""
    question = "How many hours has a leap year, plus a bit?"
    refuse, then = "366 * 24 + 17", "366 * 24 + 18"
    model = ScriptedModel([react("calculator", f'{{"expression": "{refuse}"}}'),
                           react("calculator", f'{{"expression": "{then}"}}'),
                           react("calculator", f'{{"expression": "{then}"}}'),
                           "Final Answer: 8802"])
    result = await Agent(model=model, tools=[calculator],
                         aids=Aids(ground_figures=True)).arun(question)
    first, second, third = [o.output for s in result.steps for o in s.observations]
    assert first.startswith("The call of 'calculator' was not run: the figures 366, 24, 17 "
                             "appear")
    assert second.startswith("The call of 'calculator' was not run: the figures 366, 24, 18 "
                              "appear")
    assert third == "8802"
    plain = ScriptedModel([react("calculator", f'{{"expression": "{refuse}"}}'),
                           "Final Answer: 8801"])
    result = await Agent(model=plain, tools=[calculator]).arun(question)
    assert [o.output for s in result.steps for o in s.observations] == ["8801"]


async def test_a_default_of_the_tool_is_told() -> None:
    """The tool's definition is in the prompt: a default copied from it is grounded."""
    model = ScriptedModel([react("read_lines", '{"file_path": "a.csv", "max_lines": 200}'),
                           "Final Answer: 42"])
    result = await Agent(model=model, tools=[read_lines],
                         aids=Aids(ground_figures=True)).arun("How many apples in a.csv?")
    assert [o.output for s in result.steps for o in s.observations] == ["apples,42"]


async def test_a_sample_in_the_tools_description_is_not_told() -> None:
    """The 1.5B answered a quarter of a budget it never read with the calculator's sample
    expression, copied from its description: that is no figure it was told."""
    model = ScriptedModel([react("calculator", '{"expression": "(2 + 3) * sqrt(16) / 2"}'),
                           react("calculator", '{"expression": "(2 + 3) * sqrt(16) / 2"}'),
                           "Final Answer: 10"])
    result = await Agent(model=model, tools=[calculator], aids=Aids(ground_figures=True)).arun(
        "notes.txt gives a budget. What is a quarter of it?")
    first, second = [o.output for s in result.steps for o in s.observations]
    assert first.startswith("The call of 'calculator' was not run: the figure 16 appears")
    assert second == "10.0"


def test_a_figure_too_long_for_a_float_is_ungrounded_not_a_crash() -> None:
    """A model's 400-digit figure beside a told one: named as ungrounded (it was an
    OverflowError in the step logic)."""
    from miniagent.core.runtime.grounding import ungrounded_figures
    from miniagent.core.types import ToolCall

    call = ToolCall(id="c1", name="calculator", arguments={"expression": "27 - " + "9" * 400})
    assert ungrounded_figures(call, ["Shanghai: 27 °C"]) == ("9" * 400,)

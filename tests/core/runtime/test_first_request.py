"""``first_request`` (what the embedded model warms its prompt cache with) is the request a new
session's first step really sends: the same renderer, byte for byte, for each protocol (react,
native, hybrid, auto) with tool choice and tool selection, and the same on every call."""

from __future__ import annotations

import copy

import pytest

from miniagent import Agent, Aids, Limits, ModelSettings, ScriptedModel, tool
from miniagent.core.runtime.loop import first_request, warmup_request
from miniagent.core.runtime.run import rules_for
from miniagent.core.tools.toolbox import Toolbox


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize(("tool_mode", "options"), [
    ("react", {}),
    ("react", {"aids": Aids(tool_selection=2, tool_choice="required", worked_example=True)}),
    ("react", {"aids": Aids(tool_selection=2, strict_selection=True, quote_answers=True)}),
    ("react", {"aids": Aids(act_first=True), "limits": Limits(answer_after_results=1)}),
    ("native", {"aids": Aids(tool_choice="add")}),
    ("native", {"aids": Aids(tool_selection=1)}),
    ("hybrid", {}),
    ("hybrid", {"aids": Aids(tool_choice="required", tool_selection=2)}),
    ("auto", {}),
    ("auto", {"aids": Aids(tool_choice="weather"),
              "model_settings": ModelSettings(temperature=0.3, max_tokens=64)}),
])
async def test_the_first_request_is_what_the_first_step_sends(
        tool_mode: str, options: dict[str, object]) -> None:
    reply = ("Thought: known\nFinal Answer: sunny" if tool_mode == "react"
             else {"content": "Paris is sunny."})
    model = ScriptedModel([reply], tool_mode=tool_mode)  # type: ignore[arg-type]
    agent = Agent(model=model, tools=[add, weather], instructions="Be brief. 简短回答。",
                  **options)  # type: ignore[arg-type]
    question = "What is the weather in Paris?"
    rules = rules_for(agent.spec, await Toolbox.gather(agent.sources), protocol=agent.protocol)
    expected = first_request(rules, question)
    assert first_request(rules, question) == expected  # deterministic: no clock, no ids
    await agent.arun(question)
    assert model.requests[0] == expected
    if not getattr(options.get("aids"), "strict_selection", None):  # strict: the tools
        # depend on the question
        prefix = warmup_request(rules)  # no question: what a warm-up renders
        assert prefix == first_request(rules)
        assert prefix.messages[:-1] == copy.deepcopy(expected.messages[:-1])


@pytest.mark.parametrize("tool_mode", ["react", "native"])
async def test_under_strict_selection_the_warm_up_offers_the_first_tool(tool_mode: str) -> None:
    """No question matches no tool; the warm-up offers the first tool instead, so a first
    question matching it alone finds the whole prompt before it cached, and one matching
    another tool the part before the tools."""
    agent = Agent(model=ScriptedModel([], tool_mode=tool_mode), tools=[add, weather],
                  aids=Aids(strict_selection=True), instructions="Be brief.")
    rules = rules_for(agent.spec, await Toolbox.gather(agent.sources), protocol=agent.protocol)
    warm = warmup_request(rules)
    assert [t["function"]["name"] for t in warm.tools or []] == (
        ["add"] if tool_mode == "native" else [])  # ReAct lists them in the prompt
    empty = first_request(rules)  # what the warm-up was before: no tool at all
    adding = first_request(rules, "Please add 2 and 3.")
    assert (warm.messages[:-1], warm.tools) == (adding.messages[:-1], adding.tools)
    assert (warm.messages[:-1], warm.tools) != (empty.messages[:-1], empty.tools)
    other = first_request(rules, "What is the weather in Paris?")
    if tool_mode == "react":
        system = warm.messages[0]["content"]
        assert "- add:" in system and "Tools: none" not in system
        shared = system.split("Tools:")[0]
        assert shared.endswith("Be brief.\n\n")
        assert other.messages[0]["content"].startswith(shared)


async def test_a_narrower_tool_selection_shares_the_prompt_up_to_the_tools() -> None:
    model = ScriptedModel(["Thought: known\nFinal Answer: sunny"])
    agent = Agent(model=model, tools=[add, weather], aids=Aids(tool_selection=1),
                  instructions="Be brief.")
    rules = rules_for(agent.spec, await Toolbox.gather(agent.sources), protocol=agent.protocol)
    await agent.arun("What is the weather in Paris?")
    warmed, sent = first_request(rules).messages[0], model.requests[0].messages[0]
    assert warmed != sent  # the question picked another tool than the empty one did
    shared = warmed["content"].split("Tools:")[0]
    assert shared.endswith("Be brief.\n\n") and sent["content"].startswith(shared)

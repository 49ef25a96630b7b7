"""Tool selection in the loop: what each request offers, what the step records, what runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from miniagent import (
    Agent,
    Aids,
    Compression,
    Limits,
    ModelSettings,
    OpenAICompatibleModel,
    ScriptedModel,
    SQLiteStore,
)
from miniagent.core.errors import UserError
from miniagent.core.tools.tool import Tool
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import StubServer

SUBJECTS = [
    ("weather", "Current weather and temperature forecast of a city."),
    ("currency", "Convert an amount of money between currencies."),
    ("email", "Send an email message to a recipient."),
    ("translate", "Translate text into another language."),
    ("stock", "Latest share price of a listed company."),
    ("train", "查询火车票：两个城市之间的列车时刻和余票。"),
    ("timezone", "Current time in a timezone."),
    ("wiki", "Look up an encyclopedia article."),
    ("calendar", "Add an event to the calendar."),
    ("recipe", "Find a cooking recipe for a dish."),
    ("flight", "Search flights between airports."),
    ("dictionary", "Definition of an English word."),
]


def make_tools(ran: list[str]) -> list[Tool]:
    def runner(name: str) -> Any:
        def run(args: dict[str, Any]) -> str:
            ran.append(name)
            return f"{name} result for {json.dumps(args, ensure_ascii=False)}"
        return run

    return [Tool.from_schema(name=f"{subject}_tool", description=text,
                             parameters={"type": "object",
                                         "properties": {"query": {"type": "string"}}},
                             fn=runner(f"{subject}_tool"))
            for subject, text in SUBJECTS]


def offered_in_prompt(request: ModelRequest) -> set[str]:
    prompt = request.messages[0]["content"]
    line = next(x for x in prompt.splitlines() if x.startswith("Valid tool names: "))
    return set(line.removeprefix("Valid tool names: ").split(", "))


def react(action: str, query: str) -> str:
    return f"Thought: use it\nAction: {action}\nAction Input: {json.dumps({'query': query})}"


def test_each_react_request_offers_k_tools_and_the_grammar_follows() -> None:
    ran: list[str] = []
    model = ScriptedModel([react("weather_tool", "Paris"), "Final Answer: sunny"], grammar=True)
    agent = Agent(model=model, tools=make_tools(ran), aids=Aids(tool_selection=3))
    result = agent.run("What is the weather forecast in Paris?")
    assert (result.status, result.final_answer, ran) == ("completed", "sunny", ["weather_tool"])
    first = model.requests[0]
    offered = offered_in_prompt(first)
    assert len(offered) == 3 and "weather_tool" in offered
    assert first.grammar is not None
    for name, description in SUBJECTS:  # the grammar lets the model name offered tools only
        assert (f'"{name}_tool\\nAction Input: "' in first.grammar) == (f"{name}_tool" in offered)
        assert (description in first.messages[0]["content"]) == (f"{name}_tool" in offered)
    assert result.steps[0].offered_tools is not None
    assert set(result.steps[0].offered_tools) == offered


@pytest.mark.parametrize("choice", ["required", "weather_tool"])
def test_a_tool_choice_narrows_the_grammar_to_the_offered_tools(choice: str) -> None:
    """``required`` (or a name) rebuilds the ReAct grammar: from the tools this step offers,
    never from every registered tool the selection left out."""
    ran: list[str] = []
    model = ScriptedModel([react("weather_tool", "Paris"), "Final Answer: sunny"], grammar=True)
    agent = Agent(model=model, tools=make_tools(ran),
                  aids=Aids(tool_selection=2, tool_choice=choice))
    result = agent.run("What is the weather forecast in Paris?")
    assert (result.status, result.final_answer, ran) == ("completed", "sunny", ["weather_tool"])
    first = model.requests[0]
    offered = offered_in_prompt(first)
    assert first.grammar is not None and "Final Answer" not in first.grammar
    in_grammar = {f"{name}_tool" for name, _ in SUBJECTS
                  if f'"{name}_tool\\nAction Input: "' in first.grammar}
    assert in_grammar == ({"weather_tool"} if choice == "weather_tool" else offered)
    assert len(offered) == 2


def test_native_requests_list_only_the_selected_tools() -> None:
    model = ScriptedModel([
        {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "train_tool", "arguments": json.dumps({"query": "上海-北京"})}}]},
        {"content": "有票"},
    ], tool_mode="native")
    ran: list[str] = []
    result = Agent(model=model, tools=make_tools(ran), aids=Aids(tool_selection=2)).run(
        "明天上海到北京的火车票还有吗？")
    assert (result.status, result.final_answer, ran) == ("completed", "有票", ["train_tool"])
    listed = [t["function"]["name"] for t in model.requests[0].tools or []]
    assert len(listed) == 2 and "train_tool" in listed
    assert result.steps[0].offered_tools == listed


def test_a_registered_tool_not_offered_still_runs_and_is_offered_from_then_on() -> None:
    ran: list[str] = []
    model = ScriptedModel([react("recipe_tool", "soup"), "Final Answer: done"])
    agent = Agent(model=model, tools=make_tools(ran), aids=Aids(tool_selection=2),
                  model_settings=ModelSettings(grammar=False))
    result = agent.run("What is the weather forecast in Paris?")
    assert "recipe_tool" not in offered_in_prompt(model.requests[0])
    assert ran == ["recipe_tool"] and result.status == "completed"
    assert not result.steps[0].observations[0].is_error
    assert "recipe_tool" in offered_in_prompt(model.requests[1])
    assert "recipe_tool" in (result.steps[1].offered_tools or [])


def test_an_unknown_tool_is_still_an_error_observation_naming_every_tool() -> None:
    ran: list[str] = []
    model = ScriptedModel([react("launch_rockets", "now"), "Final Answer: no"])
    result = Agent(model=model, tools=make_tools(ran), aids=Aids(tool_selection=2),
                   model_settings=ModelSettings(grammar=False)).run("weather?")
    observation = result.steps[0].observations[0]
    assert observation.is_error and ran == []
    assert "Unknown tool 'launch_rockets'" in observation.output
    assert "dictionary_tool" in observation.output  # the allow-list, not only the offered


def test_the_choice_is_saved_with_the_step(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    model = ScriptedModel([react("stock_tool", "ACME"), "Final Answer: 12"])
    agent = Agent(model=model, tools=make_tools([]), aids=Aids(tool_selection=4),
                  store=SQLiteStore(path))
    result = agent.run("What is the latest share price of ACME?")
    loaded = SQLiteStore(path).load(result.session_id)
    assert [s.offered_tools for s in loaded.steps] == [s.offered_tools for s in result.steps]
    assert loaded.steps[0].offered_tools is not None
    assert "stock_tool" in loaded.steps[0].offered_tools


def test_without_selection_every_tool_is_offered_and_nothing_is_recorded() -> None:
    model = ScriptedModel(["Final Answer: hi"])
    result = Agent(model=model, tools=make_tools([])).run("weather?")
    assert len(offered_in_prompt(model.requests[0])) == len(SUBJECTS)
    assert result.steps[0].offered_tools is None


def test_tool_selection_must_not_be_negative() -> None:
    with pytest.raises(UserError, match="tool_selection must be at least 0"):
        Agent(model=ScriptedModel([]), tools=make_tools([]), aids=Aids(tool_selection=-1))
    assert Agent(model=ScriptedModel([]), aids=Aids(tool_selection=0)).spec.tool_selection is None


def test_a_real_http_server_receives_only_the_selected_tools() -> None:
    replies = [{"tool_calls": [{"name": "flight_tool", "arguments": {"query": "CDG-NRT"}}],
                "content": None}, "Two flights."]
    ran: list[str] = []
    with StubServer(replies).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="native")
        agent = Agent(model=model, tools=make_tools(ran), aids=Aids(tool_selection=3))
        result = agent.run("Search flights from the CDG airport to NRT")
        sent = [[t["function"]["name"] for t in r.get("tools", [])] for r in stub.requests]
    assert (result.status, result.final_answer, ran) == ("completed", "Two flights.",
                                                         ["flight_tool"])
    assert len(sent[0]) == 3 and "flight_tool" in sent[0]
    assert "flight_tool" in sent[1]
    assert sent == [s.offered_tools for s in result.steps]


def test_a_format_error_names_the_offered_tools_and_keeps_the_selection() -> None:
    model = ScriptedModel(["I think I should look at the weather", react("weather_tool", "Oslo"),
                           "Final Answer: cold"])
    result = Agent(model=model, tools=make_tools([]), aids=Aids(tool_selection=3),
                   model_settings=ModelSettings(grammar=False),
                   ).run("What is the weather forecast in Oslo?")
    assert result.status == "completed" and result.steps[0].error
    note = model.requests[1].messages[-1]["content"]
    assert "Format error" in note
    named = set(note.split("Valid tool names: ")[1].splitlines()[0].split(", "))
    assert named == set(result.steps[0].offered_tools or [])
    assert len(named) == 3 and "weather_tool" in named
    assert offered_in_prompt(model.requests[1]) == named  # the note did not widen the choice


def test_selection_and_context_compression_work_together() -> None:
    ran: list[str] = []
    steps = [react("wiki_tool", f"page {n} of the encyclopedia article") for n in range(1, 9)]
    model = ScriptedModel([*steps, "Final Answer: read"])
    agent = Agent(model=model, tools=make_tools(ran), aids=Aids(tool_selection=2),
                  limits=Limits(max_steps=12), compression=Compression.of("400c", keep_last=2))
    result = agent.run("Read the encyclopedia article about Oslo")
    assert (result.status, len(ran)) == ("completed", 8)
    assert agent.session(result.session_id).compactions  # it did compact
    for step, request in zip(result.steps, model.requests):
        assert step.offered_tools is not None and "wiki_tool" in step.offered_tools
        assert offered_in_prompt(request) == set(step.offered_tools)


def test_a_tool_named_by_tool_choice_is_always_offered() -> None:
    ran: list[str] = []
    model = ScriptedModel([react("recipe_tool", "soup"), "Final Answer: boil it"])
    result = Agent(model=model, tools=make_tools(ran),
                   aids=Aids(tool_selection=2, tool_choice="recipe_tool"),
                   ).run("What is the weather forecast in Paris?")
    assert result.status == "completed" and ran == ["recipe_tool"]
    first = offered_in_prompt(model.requests[0])
    assert "recipe_tool" in first and "weather_tool" in first and len(first) == 3

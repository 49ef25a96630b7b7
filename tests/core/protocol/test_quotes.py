"""Quoted answers: after a tool result the ReAct grammar's Final Answer is a span of a result.

The grammar is checked with the test matcher (``gbnf_match``) and, where the embedded model
can run, with llama.cpp itself through a whole run whose answer must be a quote."""

from __future__ import annotations

import asyncio

import pytest
from gbnf_match import accepts

from embedded_model import model_path
from miniagent import Agent, Limits, tool
from miniagent.core.models.local import LocalModel
from miniagent.core.protocol import quotes
from miniagent.core.protocol.grammar import react_grammar
from miniagent.core.types import CallRecord, ModelRequest, Observation, Step, ToolCall


@tool
def weather(city: str) -> str:
    """Today's weather in a city: temperature, condition and humidity."""
    return f"{city}: 16 °C, windy, humidity 50%"


def quoted(texts: list[str], *, final: bool = True) -> str:
    request = ModelRequest(messages=[], grammar=react_grammar([weather], final=final))
    grammar = quotes.constrain(request, texts).grammar
    assert grammar is not None
    return grammar


@pytest.mark.parametrize("answer", ["50%", "50", "humidity 50%", "16", "Sydney", "16 °C",
                                    "Sydney: 16 °C, windy, humidity 50%", "windy, humidity"])
def test_a_quote_of_the_result_is_admitted(answer: str) -> None:
    grammar = quoted(["Sydney: 16 °C, windy, humidity 50%"])
    assert accepts(grammar, f"Thought: done\nFinal Answer: {answer}")


@pytest.mark.parametrize("answer", ["16.5", "I should call Sydney.", "humidity  50%",
                                    "50% humid", "", "%", ": 16", "5"])
def test_anything_else_is_refused(answer: str) -> None:
    grammar = quoted(["Sydney: 16 °C, windy, humidity 50%"])
    assert not accepts(grammar, f"Thought: done\nFinal Answer: {answer}")


def test_the_model_may_still_act() -> None:
    grammar = quoted(["Sydney: 16 °C"])
    assert accepts(grammar, 'Thought: more\nAction: weather\nAction Input: {"city": "Oslo"}')


def test_chinese_text_is_quoted_from_any_character_and_lines_become_spaces() -> None:
    grammar = quoted(["会议记录：参会人数 12 人\n地点：上海"])
    for answer in ["12 人", "参会人数 12 人", "人数 12", "上海", "12 人 地点：上海", "12"]:
        assert accepts(grammar, f"Thought: ok\nFinal Answer: {answer}"), answer
    assert not accepts(grammar, "Thought: ok\nFinal Answer: 13 人")
    assert not accepts(grammar, "Thought: ok\nFinal Answer: 12 人\n地点：上海")
    assert not accepts(grammar, "Thought: ok\nFinal Answer: ：上海")  # starts at a word


def test_a_figure_is_quoted_out_of_its_unit_and_punctuation() -> None:
    grammar = quoted(["Oslo: 18°C, windy 「16」度 {\"temp\":16}"])
    for answer in ["18", "18°C", "Oslo", "16", "16」度", "temp\":16}"]:
        assert accepts(grammar, f"Thought: ok\nFinal Answer: {answer}"), answer
    assert not accepts(grammar, "Thought: ok\nFinal Answer: 18 °C")


def test_a_huge_result_is_read_only_up_to_the_bound() -> None:
    lines, _ = quotes.quote_rules(["长" * 2_000_000])
    assert len(lines) == quotes.WORDS


def test_several_results_each_quotable_and_the_length_is_bounded() -> None:
    grammar = quoted(["Paris: 18 °C", "Berlin: 12 °C"])
    assert accepts(grammar, "Thought: ok\nFinal Answer: 18 °C")
    assert accepts(grammar, "Thought: ok\nFinal Answer: Berlin: 12")
    assert not accepts(grammar, "Thought: ok\nFinal Answer: 18 °C Berlin: 12 °C")  # two results
    lines, starts = quotes.quote_rules(["w " * 1000])
    assert len(starts) == len(lines) == quotes.WORDS


def test_nothing_changes_without_a_final_branch_a_grammar_or_a_result() -> None:
    assert quoted(["Paris: 18 °C"], final=False) == react_grammar([weather], final=False)
    plain = ModelRequest(messages=[], grammar=None)
    assert quotes.constrain(plain, ["x"]).grammar is None
    assert quoted([]) == react_grammar([weather])


def record(output: str, *, error: bool = False, ran: bool = True) -> CallRecord:
    call = ToolCall(id=output, name="weather", arguments={})
    entry = CallRecord(call=call)
    if ran:
        entry.move("started", "started", 0.0)
    entry.move("completed", "ran" if ran else "repeated", 0.0)
    entry.observation = Observation(call_id=call.id, tool_name="weather", output=output,
                                    is_error=error)
    return entry


def test_only_results_of_calls_that_ran_and_succeeded_are_quoted_latest_first() -> None:
    steps = [Step(index=1, calls=[record("a"), record("oops", error=True)]),
             Step(index=2, calls=[record("b"), record("  ")]),
             Step(index=3, calls=[record("you called it twice", ran=False), record("c"),
                                  record("d")])]
    assert quotes.results(steps) == ["d", "c", "b"]
    assert quotes.results(steps[:1]) == ["a"]
    assert quotes.results([]) == []


def test_the_embedded_model_answers_with_a_quote_of_the_result() -> None:
    path = model_path()
    model = LocalModel(path)
    agent = Agent(model=model, tools=[weather], limits=Limits(max_steps=4))
    try:
        result = asyncio.run(agent.arun("What is the humidity in Sydney today, in percent?"))
    finally:
        model.unload()
    assert result.status == "completed", result.reason
    results = [r.observation.output for s in result.steps for r in s.calls
               if r.observation is not None and not r.observation.is_error]
    assert results, "the model called no tool"
    answer = result.final_answer or ""
    assert answer and any(answer in " ".join(text.split()) for text in results), answer


"""Formats real models and other frameworks' prompts produce: each parses to the right decision
or fails with a format error, never to a wrong tool or wrong arguments.

The forms come from issue 11 and from what the ReAct parsers of LangChain (single-input and
structured chat), LlamaIndex and smolagents accept in their own test suites (forms learnt, no
text copied)."""

from __future__ import annotations

from typing import Any

import pytest

from miniagent._internal.jsonscan import decode_arguments
from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.types import ParsedOutput


def action_of(text: str) -> tuple[str, dict[str, Any], str, str | None]:
    out = parse_react(text)
    assert out.kind == "action", (out.kind, out.error)
    (call,) = out.tool_calls
    return call.name, call.arguments, call.raw_arguments, call.arguments_error


def final_of(text: str) -> str:
    out = parse_react(text)
    assert out.kind == "final", (out.kind, out.error)
    assert out.final_answer is not None
    return out.final_answer


def invalid(text: str) -> ParsedOutput:
    out = parse_react(text)
    assert out.kind == "invalid" and out.error and not out.tool_calls, out
    return out


# -- numbered labels (ReAct few-shot prompts) ---------------------------------------------------

def test_numbered_labels() -> None:
    out = parse_react('Thought 1: I need to look it up\nAction 1: search\n'
                      'Action Input 1: {"q": "Colorado orogeny"}')
    assert out.thought == "I need to look it up"
    assert action_of(out.text)[:2] == ("search", {"q": "Colorado orogeny"})


def test_several_numbered_actions_the_first_wins() -> None:
    text = ('Thought 1: first\nAction 1: search\nAction Input 1: {"q": "a"}\n'
            'Observation 1: made up\nThought 2: then\nAction 2: add\nAction Input 2: {"a": 1}')
    out = parse_react(text)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("search", {"q": "a"})]
    assert "Observation 1" not in out.text and "Action 2" not in out.text


def test_numbered_final_answer() -> None:
    assert final_of("Thought 3: I know it\nFinal Answer 3: 1,800 to 7,000 ft") == (
        "1,800 to 7,000 ft")


# -- a JSON blob naming the tool after Action: ---------------------------------------------------

@pytest.mark.parametrize("text", [
    'Thought: look\nAction:\n```json\n{"action": "search", "action_input": {"q": "SF"}}\n```',
    'Thought: look\nAction:\n```\n{"action": "search", "action_input": {"q": "SF"}}\n```',
    'Thought: look\nAction:```json\n{"action": "search", "action_input": {"q": "SF"}}```',
    'Thought: look\nAction: ```{"action": "search", "action_input": {"q": "SF"}}```',
    'Thought: look\nAction: {"action": "search", "action_input": {"q": "SF"}}',
    'Action:\n{\n  "action": "search",\n  "action_input": {"q": "SF"}\n}\nObservation: fake',
    'Action:\n```json\n{"name": "search", "arguments": {"q": "SF"}}\n```',
    'Action: {"name": "search", "parameters": {"q": "SF"}}',
    'Action: {"name": "search", "arguments": "{\\"q\\": \\"SF\\"}"}',  # arguments as a string
    'Action: {"tool": "search", "tool_input": {"q": "SF"}}',
])
def test_action_followed_by_a_json_blob(text: str) -> None:
    name, arguments, _, error = action_of(text)
    assert (name, arguments, error) == ("search", {"q": "SF"}, None)
    assert "fake" not in parse_react(text).text


def test_a_blob_with_a_string_input_keeps_it_bare() -> None:
    name, arguments, raw, error = action_of(
        'Action:\n```\n{"action": "search", "action_input": "weather in SF"}\n```')
    assert (name, arguments, raw, error) == ("search", {}, "weather in SF", None)


def test_a_blob_final_answer_is_the_answer() -> None:
    assert final_of('Thought: done\nAction:\n```json\n{"action": "Final Answer", '
                    '"action_input": "It is 42"}\n```') == "It is 42"
    # smolagents' final_answer tool with its one argument
    assert final_of('Action:\n{"name": "final_answer", "arguments": {"answer": "Paris"}}') == (
        "Paris")


def test_a_list_of_blobs_takes_the_first() -> None:
    assert action_of('Action:\n[{"name": "search", "arguments": {"q": "a"}}, '
                     '{"name": "add", "arguments": {"a": 1}}]')[:2] == ("search", {"q": "a"})


@pytest.mark.parametrize("text", [
    'Action: {"q": "SF"}',  # arguments, but which tool?
    'Action:\n```json\n{"action": "", "action_input": {}}\n```',
    'Action: {"action": 42}',
])
def test_a_blob_naming_no_tool_is_a_format_error(text: str) -> None:
    assert "names no tool" in (invalid(text).error or "")


def test_a_truncated_blob_is_not_repaired_into_a_call() -> None:
    out = invalid('Action:\n```json\n{"action": "search", "action_input": {"q": \n```')
    assert "not complete" in (out.error or "")


def test_a_reply_that_is_only_a_langchain_blob() -> None:
    text = '```json\n{"action": "search", "action_input": {"q": "SF"}}\n```'
    assert action_of(text)[:2] == ("search", {"q": "SF"})
    assert final_of('{"action": "Final Answer", "action_input": "done"}') == "done"
    invalid('{"name": "Alice", "age": 3}')  # JSON data is not taken for a call


# -- Answer: (LlamaIndex) ------------------------------------------------------------------------

def test_answer_alone_is_a_final_answer_label() -> None:
    assert final_of("Thought: I can answer without tools.\nAnswer: 2") == "2"
    assert final_of("Thought: enough.\nAnswer: Here it is:\n\nsecond line") == (
        "Here it is:\n\nsecond line")


def test_answer_inside_a_line_is_not_a_label() -> None:
    name, arguments, _, _ = action_of(
        'Thought: the Answer: is unknown\nAction: search\nAction Input: {"q": "x"}')
    assert (name, arguments) == ("search", {"q": "x"})


# -- a parenthesised description after the tool name ---------------------------------------------

def test_a_description_in_parentheses_leaves_the_arguments_to_action_input() -> None:
    assert action_of('Thought: add\nAction: add (adds two numbers)\n'
                     'Action Input: {"a": 1, "b": 2}')[:2] == ("add", {"a": 1, "b": 2})
    # without an Action Input line, parentheses are still an inline call
    assert action_of('Action: add({"a": 1, "b": 2})')[:2] == ("add", {"a": 1, "b": 2})


# -- Action Input forms --------------------------------------------------------------------------

def test_empty_object_input() -> None:
    assert action_of("Action: now\nAction Input: {}")[:3] == ("now", {}, "{}")


def test_input_inside_a_call_wrapper() -> None:
    assert action_of('Action: add\nAction Input: add({"a": 1, "b": 2})')[:2] == (
        "add", {"a": 1, "b": 2})
    assert action_of('Action: Search\nAction Input: search({"q": "x"})')[:2] == (
        "Search", {"q": "x"})


def test_a_wrapper_naming_another_tool_is_an_arguments_error() -> None:
    name, arguments, _, error = action_of('Action: add\nAction Input: sub({"a": 1})')
    assert (name, arguments) == ("add", {}) and error and "calls sub(...)" in error


def test_bare_string_inputs_stay_bare() -> None:
    assert action_of("Thought: t\nAction: search\nAction Input: what is the temperature in SF?"
                     )[:3] == ("search", {}, "what is the temperature in SF?")
    assert action_of("Action: search\nAction Input: {temperature in SF}")[1:] == (
        {}, "{temperature in SF}", None)


def test_blank_lines_between_labels() -> None:
    assert action_of('Thought: t\n\nAction: add\n\nAction Input: {"a": 1, "b": 1}\n')[:2] == (
        "add", {"a": 1, "b": 1})


# -- final answers -------------------------------------------------------------------------------

def test_a_final_answer_stops_before_a_later_action() -> None:
    out = parse_react('Thought: t\nFinal Answer: 42\nAction: search\nAction Input: {"q": "x"}')
    assert (out.kind, out.final_answer, out.tool_calls) == ("final", "42", [])
    assert "search" not in out.text


def test_action_final_answer_with_its_input() -> None:
    assert final_of('Action: Final Answer\nAction Input: "It is 42"') == "It is 42"
    invalid("Action: Final Answer\nAction Input: ")


def test_an_action_and_a_final_answer_on_one_line_is_a_format_error() -> None:
    out = invalid("Thought: agent thought here\nAction: search Final Answer:\n"
                  "Action Input: what is the temperature in SF?")
    assert "on one line" in (out.error or "")
    assert action_of("Action: final-answer-check\nAction Input: {}")[0] == "final-answer-check"


def test_an_observation_before_the_thought_does_not_hide_the_answer() -> None:
    assert final_of("Observation: 2.169\nThought: I now know the final answer\n"
                    "Final Answer: 29 years") == "29 years"


# -- JSON values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", ['{"a": 1}{"a": 2}', '{"a": 1} {"b": 2}', '{"a": 1}\n{"a": 2}',
                                 '{"a": 1}[2]'])
def test_glued_json_values_are_invalid_arguments(raw: str) -> None:
    arguments, error = decode_arguments(raw)
    assert arguments is None and error and "glued" in error


# -- native responses ----------------------------------------------------------------------------

def native(message: dict[str, Any]) -> ParsedOutput:
    response = normalize_completion({"choices": [{"index": 0, "message": message}]})
    return NativeProtocol().parse(response)


@pytest.mark.parametrize("entry", [
    {"id": "c1", "type": "function", "function": {"arguments": "{}"}},
    {"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}},
    {"id": "c1", "type": "function"},
])
def test_nameless_native_entries_are_dropped_beside_text(entry: dict[str, Any]) -> None:
    out = native({"content": "Paris is the capital.", "tool_calls": [entry]})
    assert (out.kind, out.final_answer) == ("final", "Paris is the capital.")
    both = native({"content": "Looking it up.", "tool_calls": [
        entry, {"id": "c2", "function": {"name": "search", "arguments": '{"q": "x"}'}}]})
    assert [(c.name, c.arguments) for c in both.tool_calls] == [("search", {"q": "x"})]


def test_a_nameless_entry_without_text_stays_for_the_registry_to_refuse() -> None:
    out = native({"content": None, "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]})
    assert out.kind == "action" and [c.name for c in out.tool_calls] == [""]


def test_two_objects_glued_in_native_arguments_are_reported() -> None:
    out = native({"content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "search", "arguments": '{"q": "a"}\n{"q": "b"}'}}]})
    (call,) = out.tool_calls
    assert call.arguments == {} and call.arguments_error and "glued" in call.arguments_error

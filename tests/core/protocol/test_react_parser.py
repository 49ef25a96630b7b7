"""parse_react and decode_arguments against what models really write."""

from __future__ import annotations

from typing import Any

import pytest

from miniagent._internal.jsonscan import (
    INCOMPLETE,
    decode_arguments,
    incomplete,
    scan_end,
    strip_fences,
)
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.types import ParsedOutput, ToolCall


def only_call(out: ParsedOutput) -> ToolCall:
    assert out.kind == "action", out.error
    assert len(out.tool_calls) == 1
    return out.tool_calls[0]


# (model output, tool name, arguments)
ACTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ('Thought: add\nAction: calc\nAction Input: {"expr": "1+1"}', "calc", {"expr": "1+1"}),
    (
        'Action: calc\nAction Input: {"a": {"b": {"c": [1, {"d": 2}]}}}',
        "calc",
        {"a": {"b": {"c": [1, {"d": 2}]}}},
    ),
    (
        'Action: echo\nAction Input: {"text": "a } b { c", "q": "say \\"}\\" now"}',
        "echo",
        {"text": "a } b { c", "q": 'say "}" now'},
    ),
    (
        'Action: echo\nAction Input: {"text": "line\\nObservation: not real"}',
        "echo",
        {"text": "line\nObservation: not real"},
    ),
    (
        'Action: calc\nAction Input: {"x": 1} and then {"y": 2} I guess',
        "calc",
        {"x": 1},
    ),
    ('Action: calc\nAction Input: ```json\n{"x": 1}\n```', "calc", {"x": 1}),
    ('Action: calc\nAction Input:\n```\n{"x": 1}\n```\n', "calc", {"x": 1}),
    ('Action: calc\nAction Input: ```{"x": 1}```', "calc", {"x": 1}),
    ('Action: calc\nAction Input: `{"x": 1}`', "calc", {"x": 1}),
    ('**Action:** calc\n**Action Input:** {"x": 2}', "calc", {"x": 2}),
    ('**Action**: calc\n**Action Input**: {"x": 2}', "calc", {"x": 2}),
    ('- **Action**: calc\n- **Action Input**: {"x": 2}', "calc", {"x": 2}),
    ('action: calc\naction input: {"x": 3}', "calc", {"x": 3}),
    ('ACTION: calc\nACTION INPUT: {"x": 3}', "calc", {"x": 3}),
    ('Action: calc\nAction input: {"x": 4}', "calc", {"x": 4}),
    ('Action: calc\nActionInput: {"x": 4}', "calc", {"x": 4}),
    ('Action: calc\nAction_Input: {"x": 4}', "calc", {"x": 4}),
    ('Action: calc\nInput: {"x": 4}', "calc", {"x": 4}),
    ('Thought：先算一下\nAction：calc\nAction Input：{"x": "你好"}', "calc", {"x": "你好"}),
    ('思考：需要计算\n行动：calc\n行动输入：{"expr": "1+1"}', "calc", {"expr": "1+1"}),
    ('Action: calc{"x": 1}', "calc", {"x": 1}),
    ('Action: calc({"x": 1})', "calc", {"x": 1}),
    ('Action: calc {"x":1}', "calc", {"x": 1}),
    ('Action: `calc`\nAction Input: {"x": 1}', "calc", {"x": 1}),
    ('Action: "calc"\nAction Input: {"x": 1}', "calc", {"x": 1}),
    ("Action: 'calc'\nAction Input: {\"x\": 1}", "calc", {"x": 1}),
    ('Action: calc.\nAction Input: {"x": 1}', "calc", {"x": 1}),
    ('Action: **calc**\nAction Input: {"x": 1}', "calc", {"x": 1}),
    ('**Action:**\ncalc\n**Action Input:** {"x": 1}', "calc", {"x": 1}),
    ("Action: calc\nAction Input: {'x': 1, 'y': 'it\\'s'}", "calc", {"x": 1, "y": "it's"}),
    ('Action: calc\nAction Input: {"x": 1,}', "calc", {"x": 1}),
    ('Action: calc\nAction Input: {"x": True, "y": None}', "calc", {"x": True, "y": None}),
    ('Action: calc\nAction Input: "{\\"x\\": 1}"', "calc", {"x": 1}),
    ('Thought: ok. Action: calc Action Input: {"x": 1}', "calc", {"x": 1}),
]


@pytest.mark.parametrize(("text", "name", "arguments"), ACTIONS)
def test_actions(text: str, name: str, arguments: dict[str, Any]) -> None:
    call = only_call(parse_react(text))
    assert call.name == name
    assert call.arguments == arguments
    assert call.arguments_error is None
    assert call.id == ""  # assigned by the step logic from its driver's ids


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("Action: search\nAction Input: Paris", "Paris"),
        ("Action: search\nAction Input: Paris, France.\n", "Paris, France."),
        ('Action: search\nAction Input: "Paris"', '"Paris"'),
        ("Action: stats\nAction Input: [1, 2]", "[1, 2]"),
        ("Action: square\nAction Input: 42", "42"),
        ('Action: search("Paris")', '"Paris"'),
        ("Action: search\nAction Input: ```\nParis\n```", "Paris"),
    ],
)
def test_bare_values_are_left_to_the_registry(text: str, raw: str) -> None:
    call = only_call(parse_react(text))
    assert call.arguments == {}
    assert call.raw_arguments == raw
    assert call.arguments_error is None


def test_raw_arguments_is_the_json_text() -> None:
    call = only_call(parse_react('Action: calc\nAction Input: ```json\n{"x": 1}\n```'))
    assert call.raw_arguments == '{"x": 1}'


def test_missing_action_input_means_no_arguments() -> None:
    out = parse_react("Thought: look it up\nAction: now")
    call = only_call(out)
    assert (call.name, call.arguments, call.raw_arguments) == ("now", {}, "")
    assert call.arguments_error is None
    assert out.thought == "look it up"


def test_unrepairable_json_keeps_raw_and_reports() -> None:
    call = only_call(parse_react("Action: calc\nAction Input: {]"))
    assert call.arguments == {}
    assert call.raw_arguments == "{]"
    assert call.arguments_error is not None
    assert call.arguments_error.startswith("invalid JSON")


def test_hallucinated_observation_and_final_answer_are_cut() -> None:
    text = (
        'Thought: search\nAction: search\nAction Input: {"q": "x"}\n'
        "Observation: Paris is big\nThought: I now know the final answer\n"
        "Final Answer: Paris\n"
    )
    out = parse_react(text)
    call = only_call(out)
    assert call.name == "search"
    assert call.arguments == {"q": "x"}
    assert out.final_answer is None
    assert out.text == 'Thought: search\nAction: search\nAction Input: {"q": "x"}'


@pytest.mark.parametrize(
    "tail",
    [
        "\n**Observation**: fake",
        "\n**Observation:** fake",
        " Observation: fake",
        "\nobservation: fake",
        "\nObservation：fake",
        "\nFinal Answer: fake",
        "\nAction: other\nAction Input: {}",
    ],
)
def test_text_is_cut_after_the_action(tail: str) -> None:
    head = 'Action: calc\nAction Input: {"x": 1}'
    out = parse_react(head + tail)
    assert only_call(out).arguments == {"x": 1}
    assert out.text == head


def test_observation_inside_json_string_is_not_a_cut() -> None:
    text = 'Action: note\nAction Input: {"text": "a\nObservation: b"}\nObservation: real'
    out = parse_react(text)
    assert only_call(out).arguments == {"text": "a\nObservation: b"}
    assert out.text == 'Action: note\nAction Input: {"text": "a\nObservation: b"}'


def test_several_actions_first_wins() -> None:
    text = 'Action: a\nAction Input: {"n": 1}\nAction: b\nAction Input: {"n": 2}'
    call = only_call(parse_react(text))
    assert (call.name, call.arguments) == ("a", {"n": 1})


@pytest.mark.parametrize("none", ["None", "none", "N/A", "null", ""])
def test_action_none_then_final_answer_is_final(none: str) -> None:
    out = parse_react(f"Thought: no tool needed\nAction: {none}\nFinal Answer: 4")
    assert out.kind == "final"
    assert out.final_answer == "4"
    assert out.thought == "no tool needed"


def test_action_none_without_final_is_invalid() -> None:
    out = parse_react("Action: None")
    assert out.kind == "invalid"
    assert out.error is not None and "Final Answer" in out.error


def test_action_without_tool_name_is_invalid() -> None:
    out = parse_react('Action:\nAction Input: {"x": 1}')
    assert out.kind == "invalid"
    assert out.error is not None and "without a tool name" in out.error


def test_think_blocks_are_removed_and_become_the_thought() -> None:
    out = parse_react('<think>I should add.</think>\nAction: calc\nAction Input: {"x": 1}')
    assert only_call(out).arguments == {"x": 1}
    assert out.thought == "I should add."
    assert out.text == 'Action: calc\nAction Input: {"x": 1}'


def test_thought_label_wins_over_think_block() -> None:
    out = parse_react("<think>hidden</think>Thought: visible\nFinal Answer: 1")
    assert out.thought == "visible"


def test_think_with_action_inside_is_ignored() -> None:
    out = parse_react("<think>Action: wrong\nAction Input: {}</think>\nFinal Answer: ok")
    assert out.kind == "final"
    assert out.final_answer == "ok"


def test_unclosed_think_at_start() -> None:
    out = parse_react('<think>\nAction: calc\nAction Input: {"x": 1}')
    assert only_call(out).name == "calc"


def test_closing_think_only() -> None:
    out = parse_react("reasoning from a template\n</think>\n\nFinal Answer: 2")
    assert out.final_answer == "2"
    assert out.thought == "reasoning from a template"


def test_multiline_final_answer_with_code_block() -> None:
    answer = "Use this:\n\n```python\ndef f(x):\n    return {x: 1}\n```\n\nDone."
    out = parse_react(f"Thought: I now know the final answer\nFinal Answer: {answer}\n\n")
    assert out.kind == "final"
    assert out.final_answer == answer
    assert out.thought == "I now know the final answer"
    assert out.text == f"Thought: I now know the final answer\nFinal Answer: {answer}"


def test_final_answer_before_action_is_final() -> None:
    out = parse_react("Final Answer: 42\nAction: calc\nAction Input: {}")
    assert out.kind == "final"
    assert out.final_answer is not None and out.final_answer.startswith("42")
    assert out.tool_calls == []


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("**Final Answer:** 42", "42"),
        ("**Final Answer**: 42", "42"),
        ("**Final Answer: 42**", "42"),
        ("final answer: 42", "42"),
        ("Final Answer：巴黎是法国的首都。", "巴黎是法国的首都。"),
        ("最终答案：巴黎", "巴黎"),
        ("Thought: I now know the final answer. Final Answer: 42", "42"),
    ],
)
def test_final_answer_variants(text: str, answer: str) -> None:
    out = parse_react(text)
    assert out.kind == "final"
    assert out.final_answer == answer


def test_chinese_thought_and_arguments() -> None:
    out = parse_react('Thought: 我需要查天气\nAction: weather\nAction Input: {"city": "北京"}')
    assert only_call(out).arguments == {"city": "北京"}
    assert out.thought == "我需要查天气"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty output"),
        ("   \n", "empty output"),
        ("<think>only thinking</think>", "empty output"),
        ("I think the answer is 4.", "no 'Action:' or 'Final Answer:' found"),
        ("Thought: hmm", "no 'Action:' or 'Final Answer:' found"),
        ('Action Input: {"x": 1}', "'Action Input:' without an 'Action:'"),
        ("Final Answer:   ", "'Final Answer:' is empty"),
    ],
)
def test_invalid_outputs(text: str, error: str) -> None:
    out = parse_react(text)
    assert out.kind == "invalid"
    assert out.error is not None and out.error.startswith(error)
    assert out.tool_calls == []


def test_thought_without_label_is_leading_prose() -> None:
    out = parse_react('I will compute it.\nAction: calc\nAction Input: {"x": 1}')
    assert out.thought == "I will compute it."


def test_parsing_is_deterministic() -> None:
    text = 'Thought: t\nAction: a\nAction Input: {"x": [1, 2]}'
    assert len({repr(parse_react(text)) for _ in range(20)}) == 1


def test_never_raises_on_non_text() -> None:
    out = parse_react(None)  # type: ignore[arg-type]
    assert out.kind in ("action", "final", "invalid")


def test_deep_nesting_does_not_crash() -> None:
    out = parse_react("Action: calc\nAction Input: " + "[" * 5000 + "]" * 5000)
    assert out.kind == "action"


def test_long_garbage_is_handled() -> None:
    # a linear scanner finishes this at once; a backtracking regex would not (no timing assert:
    # the benchmark measures speed)
    text = ("{ Action: x Observation: ``` \"'" * 4000) + "<think>" * 1000
    out = parse_react(text)
    assert out.kind in ("action", "final", "invalid")


# --- decode_arguments / scanner -------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ({}, None)),
        ("   ", ({}, None)),
        ('{"a": 1}', ({"a": 1}, None)),
        ('```json\n{"a": 1}\n```', ({"a": 1}, None)),
        ('"{\\"a\\": 1}"', ({"a": 1}, None)),
        ('"Paris"', (None, None)),
        ("Paris", (None, None)),
        ("[1, 2]", (None, None)),
        ("3.5", (None, None)),
        ("{'a': 'b'}", ({"a": "b"}, None)),
        ('{"a": [1, 2,],}', ({"a": [1, 2]}, None)),
        ('{"a": {"b": 1', (None, INCOMPLETE)),  # cut off: never completed by a repair
    ],
)
def test_decode_arguments(raw: str, expected: tuple[Any, Any]) -> None:
    assert decode_arguments(raw) == expected


def test_decode_arguments_reports_hopeless_json() -> None:
    args, error = decode_arguments("{]")
    assert args is None
    assert error is not None and error.startswith("invalid JSON: ")


def test_scan_end_tracks_strings_and_escapes() -> None:
    text = '{"a": "}\\"{", \'b\': "]"} tail }'
    end = scan_end(text, 0)
    assert end is not None
    assert text[:end] == '{"a": "}\\"{", \'b\': "]"}'
    assert scan_end('{"a": 1', 0) is None
    assert scan_end("x", 0) is None
    assert scan_end("", 0) is None


@pytest.mark.parametrize(
    ("raw", "inner"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('```\n{"a": 1}\n```', '{"a": 1}'),
        ('```json {"a": 1}```', '{"a": 1}'),
        ('```json\n{"a": 1}', '{"a": 1}'),
        ('`{"a": 1}`', '{"a": 1}'),
        ('  {"a": 1}  ', '{"a": 1}'),
    ],
)
def test_strip_fences(raw: str, inner: str) -> None:
    assert strip_fences(raw) == inner


@pytest.mark.parametrize("raw", ["{]", "{[}", "{:::}", '{""}'])
def test_decode_arguments_does_not_accept_lost_content(raw: str) -> None:
    args, error = decode_arguments(raw)
    assert args is None
    assert error is not None and error.startswith(("invalid JSON: ", "incomplete JSON: "))


@pytest.mark.parametrize("raw", [
    '{"to": "Alice", "amount": 15',
    '{"x": 1, "y": "ab',
    '{"expression": "17 *',
    '```json\n{"items": [1, 2',
    '"Pari',
])
def test_cut_off_arguments_are_never_repaired_into_a_call(raw: str) -> None:
    """A truncated reply (max_tokens) must not become a call with made-up closing parts."""
    out = parse_react(f"Thought: pay\nAction: transfer\nAction Input: {raw}")
    call = only_call(out)
    assert call.arguments == {}
    assert incomplete(call.raw_arguments)
    if raw.startswith(("{", "`")):
        assert call.arguments_error == INCOMPLETE


@pytest.mark.parametrize(("raw", "expected"), [
    ("{'to': 'Alice', 'amount': 1500,}", {"to": "Alice", "amount": 1500}),
    ('```json\n{"amount": 1500,}\n```', {"amount": 1500}),
    ('{"amount": 1500, "memo": None}', {"amount": 1500, "memo": None}),
])
def test_repairs_that_keep_the_meaning_still_work(raw: str, expected: dict[str, Any]) -> None:
    assert decode_arguments(raw) == (expected, None)


def test_think_tag_inside_arguments_is_kept() -> None:
    out = parse_react('Action: echo\nAction Input: {"text": "<think>x</think>"}')
    assert only_call(out).arguments == {"text": "<think>x</think>"}


def test_several_leading_think_blocks() -> None:
    out = parse_react("<think>a</think>\n<think>b</think>\nFinal Answer: c")
    assert (out.final_answer, out.thought) == ("c", "a\nb")


# --- tool names are kept as written --------------------------------------------


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("__init__", "__init__"),
        ("__call__()", "__call__"),
        ("_private", "_private"),
        ("trailing_", "trailing_"),
        ("_both_", "_both_"),
        ("__dunder__:", "__dunder__"),
        ("my-tool", "my-tool"),
        ("-dash-", "-dash-"),
        ("snake_case_tool", "snake_case_tool"),
        ("**calc**", "calc"),
        ("**__init__**", "__init__"),
        ("`__init__`", "__init__"),
        ("`my-tool`.", "my-tool"),
        ("calc:", "calc"),
        ("calc!", "calc"),
        ("calc?", "calc"),
    ],
)
@pytest.mark.parametrize("label", ["Action: ", "Action:", "**Action:** ", "__Action:__ ",
                                   "**Action**: ", "- Action: "])
def test_tool_names_keep_their_underscores_and_dashes(label: str, written: str, name: str) -> None:
    out = parse_react(f"Thought: t\n{label}{written}\nAction Input: {{}}")
    assert out.kind == "action"
    assert out.tool_calls[0].name == name


@pytest.mark.parametrize("form", ['{name}({{"a": 1}})', '{name} {{"a": 1}}',
                                  '{name}\nAction Input: {{"a": 1}}'])
def test_dunder_names_in_every_action_form(form: str) -> None:
    out = parse_react("Action: " + form.format(name="__init__"))
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("__init__", {"a": 1})]


def test_inline_action_keeps_a_dunder_name() -> None:
    out = parse_react('I will call it. Action: __init__ Action Input: {"a": 1}')
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("__init__", {"a": 1})]


def test_final_answer_keeps_leading_underscores() -> None:
    assert parse_react("Final Answer: __main__ is the module").final_answer == \
        "__main__ is the module"


# -- plain prose: no action, no answer label --------------------------------------------------

@pytest.mark.parametrize(("text", "plain"), [
    ("The answer is 87.", "The answer is 87."),
    ("Thought: The answer is 87.", "The answer is 87."),
    ("<think>80 + 7</think>\nIt is 87.", "It is 87."),
    ("It is 87.\nObservation: 87", "It is 87."),
])
def test_plain_prose_is_invalid_with_its_plain_answer(text: str, plain: str) -> None:
    out = parse_react(text)
    assert (out.kind, out.plain_answer) == ("invalid", plain)
    assert out.error == "no 'Action:' or 'Final Answer:' found"


@pytest.mark.parametrize("text", [
    "Action Input: {\"x\": 1}",  # labels that make no step are not prose
    "Thought: a\nThought: b",
    "Observation: 87",
    "Thought: use it\nAction: None",
    "",
])
def test_replies_with_labels_that_make_no_step_have_no_plain_answer(text: str) -> None:
    out = parse_react(text)
    assert out.kind == "invalid" and out.plain_answer is None

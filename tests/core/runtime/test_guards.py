"""Guards: truncation notice, repeated-action keys, deadline, the worked example copied."""

from __future__ import annotations

import json

import pytest

from miniagent import tool
from miniagent.core.protocol.react import EXAMPLE_ANSWER, EXAMPLE_PLACEHOLDERS, worked_example
from miniagent.core.runtime.guards import (
    LoopDetector,
    action_key,
    copied_answer,
    copied_example,
    cut_answer,
)
from miniagent.core.session import truncate_observation
from miniagent.core.types import ToolCall


def call(name: str, args: dict[str, object] | None = None, raw: str = "") -> ToolCall:
    return ToolCall(id="x", name=name, arguments=args or {}, raw_arguments=raw)


def test_truncation_notice_counts_removed_and_total() -> None:
    text = "x" * 4620
    out = truncate_observation(text, 1500)
    assert out == "x" * 1500 + "\n... [truncated 3,120 of 4,620 chars]"
    assert truncate_observation("short", 1500) == "short"
    assert truncate_observation(text, 0) == text


def test_action_key_normalises_case_spacing_order_and_numbers() -> None:
    a = action_key(call("search", {"q": "Paris  weather", "n": 2}))
    b = action_key(call("search", {"n": 2.0, "q": " paris weather"}))
    assert a == b
    assert a != action_key(call("search", {"q": "London weather", "n": 2}))
    assert a != action_key(call("lookup", {"q": "Paris weather", "n": 2}))
    assert action_key(call("s", raw="Paris")) == action_key(call("s", raw=" paris "))


def test_loop_detector_verdicts() -> None:
    detector = LoopDetector(limit=3)
    c = call("add", {"a": 1})
    assert [detector.check(c) for _ in range(4)] == ["ok", "ok", "intervene", "stop"]
    assert detector.check(call("add", {"a": 2})) == "ok"
    assert LoopDetector(limit=0).check(c) == "ok"


# -- what a small model copies from the worked example ---------------------------------------

@pytest.mark.parametrize(("args", "raw", "shown"), [
    ({"text": "..."}, '{"text": "..."}', '"..."'),
    ({"items": ["milk", " ... "]}, "", '"..."'),
    ({"n": "<integer>"}, '{"n": "<integer>"}', '"<integer>"'),
    ({"a": "integer>"}, '{"a":<integer>,"b":<integer>}', "<integer>"),  # as repaired JSON
    ({"x": "number>"}, '{"x": <number>}', "<number>"),
])
def test_a_call_holding_the_examples_placeholders_is_refused(args: dict[str, object], raw: str,
                                                             shown: str) -> None:
    refused = copied_example(call("remember", args, raw))
    assert refused is not None and f"placeholder {shown} of the example" in refused


@pytest.mark.parametrize("args", [
    {"text": "buy milk"}, {"text": "wait..."}, {"q": "List<integer> in Java"}, {"flag": True},
    {"items": []}, {},
])
def test_real_values_are_not_placeholders(args: dict[str, object]) -> None:
    assert copied_example(call("remember", args, json.dumps(args))) is None


def test_the_placeholders_are_what_the_worked_example_renders() -> None:
    @tool
    def note(text: str, count: int, weight: float, urgent: bool, tags: list[str]) -> str:
        """Note something."""
        return text

    shown = worked_example(note)
    for placeholder in EXAMPLE_PLACEHOLDERS:
        assert placeholder in shown
    assert shown.endswith(f"Final Answer: {EXAMPLE_ANSWER}")


@pytest.mark.parametrize("answer", [EXAMPLE_ANSWER, "The answer, taken from the Observation.",
                                    "  **the answer,  taken from the observation** "])
def test_the_examples_final_answer_copied_is_refused(answer: str) -> None:
    assert copied_answer(answer) is not None


def test_an_answer_about_the_observation_is_an_answer() -> None:
    assert copied_answer("391, taken from the Observation") is None
    assert copied_answer(None) is None


def test_a_cut_answer_names_the_limit() -> None:
    assert "max_tokens limit (64 tokens)" in cut_answer(64)
    assert "the server's token limit" in cut_answer(None)

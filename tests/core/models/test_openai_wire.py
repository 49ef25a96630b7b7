"""The OpenAI reply decoder (``normalize_completion``): the odd shapes real servers send."""

from __future__ import annotations

import re
from typing import Any

import pytest

from miniagent._internal.jsonscan import INCOMPLETE
from miniagent.core.errors import ModelResponseError
from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.types import TokenUsage


def completion(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"choices": [{"index": 0, "message": message, **extra}]}
    return body


def one_call(arguments: Any, name: str = "calc", **call: Any) -> dict[str, Any]:
    item = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    item.update(call)
    return completion({"role": "assistant", "content": None, "tool_calls": [item]})


# -- normalize_completion: content ----------------------------------------------------


def test_content_null_and_empty_are_kept_apart() -> None:
    assert normalize_completion(completion({"content": None})).content is None
    assert normalize_completion(completion({"content": ""})).content == ""
    assert normalize_completion(completion({"role": "assistant"})).content is None


def test_content_parts_are_joined() -> None:
    body = completion({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    assert normalize_completion(body).content == "ab"


def test_raw_and_finish_reason() -> None:
    body = completion({"content": "hi"}, finish_reason="length")
    response = normalize_completion(body)
    assert response.raw is body
    assert response.finish_reason == "length"


@pytest.mark.parametrize("body", [{}, {"choices": []}, {"choices": [None]}, [], {"error": "x"}])
def test_no_choice_raises(body: Any) -> None:
    with pytest.raises(ModelResponseError, match=r"no choices\[0\]"):
        normalize_completion(body)


# -- normalize_completion: tool calls -------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected", "raw"),
    [
        ('{"x": 1}', {"x": 1}, '{"x": 1}'),
        ({"x": 1}, {"x": 1}, '{"x": 1}'),
        ("", {}, ""),
        (None, {}, ""),
        ('"{\\"x\\": 1}"', {"x": 1}, '"{\\"x\\": 1}"'),  # double-encoded
        ("{'x': 1,}", {"x": 1}, "{'x': 1,}"),  # repaired
        ('{"city": "Zürich"}', {"city": "Zürich"}, '{"city": "Zürich"}'),
    ],
)
def test_argument_shapes(arguments: Any, expected: dict[str, Any], raw: str) -> None:
    (call,) = normalize_completion(one_call(arguments)).tool_calls
    assert call.arguments == expected
    assert call.raw_arguments == raw
    assert call.arguments_error is None


def test_bare_value_arguments_keep_the_raw_text() -> None:
    (call,) = normalize_completion(one_call("Paris")).tool_calls
    assert (call.arguments, call.raw_arguments, call.arguments_error) == ({}, "Paris", None)


def test_invalid_json_arguments_set_an_error() -> None:
    (call,) = normalize_completion(one_call('{"x": 1, "y": [')).tool_calls
    assert (call.arguments, call.arguments_error) == ({}, INCOMPLETE)  # never completed
    (call,) = normalize_completion(one_call("{]]]{{")).tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == "{]]]{{"
    assert call.arguments_error is not None
    assert call.arguments_error.startswith("invalid JSON")


@pytest.mark.parametrize("name", ["calc:", " calc ", "calc :", "\ncalc\n"])
def test_names_are_cleaned(name: str) -> None:
    (call,) = normalize_completion(one_call("{}", name=name)).tool_calls
    assert call.name == "calc"


def test_missing_ids_are_left_to_the_step_logic_which_assigns_unique_ones() -> None:
    from miniagent import Agent, ScriptedModel

    body = one_call("{}")
    del body["choices"][0]["message"]["tool_calls"][0]["id"]
    body["choices"][0]["message"]["tool_calls"].append(
        {"type": "function", "function": {"name": "clock", "arguments": "{}"}, "id": ""}
    )
    assert [c.id for c in normalize_completion(body).tool_calls] == ["", ""]
    model = ScriptedModel([body, {"content": "done"}], tool_mode="native")
    result = Agent(model=model).run("q")
    first, second = result.steps[0].tool_calls
    assert re.fullmatch(r"call_[0-9a-f]{16}", first.id)
    assert re.fullmatch(r"call_[0-9a-f]{16}", second.id)
    assert first.id != second.id
    sent = model.requests[1].messages
    assert [m["tool_call_id"] for m in sent[-2:]] == [first.id, second.id]


def test_legacy_function_call() -> None:
    message = {"content": None, "function_call": {"name": "calc", "arguments": '{"x": 2}'}}
    (call,) = normalize_completion(completion(message)).tool_calls
    assert (call.name, call.arguments, call.id) == ("calc", {"x": 2}, "")


def test_flat_call_shape() -> None:
    message = {"tool_calls": [{"id": "c1", "name": "calc", "arguments": {"x": 3}}]}
    (call,) = normalize_completion(completion(message)).tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "calc", {"x": 3})


def test_finish_reason_that_lies() -> None:
    empty = completion({"content": "done", "tool_calls": []}, finish_reason="tool_calls")
    assert normalize_completion(empty).tool_calls == []
    body = one_call('{"x": 1}')
    body["choices"][0]["finish_reason"] = "stop"
    assert len(normalize_completion(body).tool_calls) == 1


def test_non_dict_call_items_are_skipped() -> None:
    body = completion({"tool_calls": [None, "calc", {"function": {"name": "calc"}}]})
    (call,) = normalize_completion(body).tool_calls
    assert (call.name, call.arguments, call.raw_arguments) == ("calc", {}, "")


# -- normalize_completion: usage ------------------------------------------------------


def test_usage_openai_spelling() -> None:
    body = completion({"content": "x"})
    body["usage"] = {
        "prompt_tokens": 120,
        "completion_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 96},
    }
    usage = normalize_completion(body).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (120, 8, 96)


def test_usage_deepseek_spelling() -> None:
    body = completion({"content": "x"})
    body["usage"] = {"prompt_tokens": 50, "completion_tokens": 3, "prompt_cache_hit_tokens": 32}
    assert normalize_completion(body).usage.cached_tokens == 32


@pytest.mark.parametrize(
    "usage", [None, "n/a", {}, {"prompt_tokens": None, "prompt_tokens_details": None}]
)
def test_usage_missing_or_odd_is_unknown_not_zero(usage: Any) -> None:
    body = completion({"content": "x"})
    body["usage"] = usage
    got = normalize_completion(body).usage
    assert (got.prompt_tokens, got.completion_tokens, got.cached_tokens) == (None, None, None)
    assert got.total_tokens is None and not got.known


def test_a_body_without_usage_has_it_unknown() -> None:
    body = completion({"content": "x"})
    assert "usage" not in body
    assert normalize_completion(body).usage == TokenUsage.unknown()

"""normalize_completion against hostile bodies: any depth, any size, any shape raises only
ModelResponseError, and what it returns can be encoded, stored and printed."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent._internal.jsonscan import MAX_DEPTH, deeper_than, loads_limited
from miniagent.core.errors import ModelResponseError
from miniagent.core.models.openai_wire import MAX_BODY_DEPTH, normalize_completion
from miniagent.core.types import ModelResponse


def wrap(value: Any, depth: int, kind: str = "list") -> Any:
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


def body_with(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"choices": [{"message": message}], **extra}


def call(arguments: Any, name: Any = "calc") -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


# -- depth --------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH, 1_000, 100_000])
@pytest.mark.parametrize("where", ["content", "body", "usage", "tool_calls"])
def test_deep_bodies_are_a_response_error(depth: int, where: str) -> None:
    deep = wrap("x", depth)
    body: Any = {
        "content": body_with({"content": deep}),
        "body": deep,
        "usage": body_with({"content": "hi"}, usage=deep),
        "tool_calls": body_with({"tool_calls": deep}),
    }[where]
    with pytest.raises(ModelResponseError, match=r"nests deeper than 128 levels|no choices"):
        normalize_completion(body)


def test_a_body_that_holds_itself_is_a_response_error() -> None:
    body: dict[str, Any] = {"choices": [{"message": {"content": "hi"}}]}
    body["choices"][0]["message"]["loop"] = body
    with pytest.raises(ModelResponseError, match="nests deeper"):
        normalize_completion(body)


def test_deep_dict_arguments_are_an_argument_error_not_a_failure() -> None:
    arguments = wrap(1, MAX_DEPTH + 1, "dict")
    response = normalize_completion(body_with({"content": None, "tool_calls": [call(arguments)]}))
    (parsed,) = response.tool_calls
    assert parsed.arguments == {}
    assert parsed.arguments_error == "invalid JSON: nested deeper than 64 levels"
    assert len(parsed.raw_arguments) < 300


def test_numbers_with_no_json_form_do_not_escape() -> None:
    message = {"content": None, "tool_calls": [call({"n": 10**5000}), call([10**5000])]}
    response = normalize_completion(body_with(message))
    assert response.tool_calls[0].arguments == {"n": 10**5000}
    assert "<an integer of" in response.tool_calls[0].raw_arguments
    assert response.tool_calls[1].arguments == {}


def test_not_a_completion_reports_a_short_excerpt() -> None:
    with pytest.raises(ModelResponseError) as caught:
        normalize_completion({"data": ["x" * 1_000_000]})
    assert len(str(caught.value)) < 300


# -- content parts, names, counts ---------------------------------------------------------


def test_only_text_parts_make_the_content() -> None:
    parts = [{"type": "text", "text": "hi"}, 5, {"type": "image_url", "image_url": {"url": "u"}},
             None, " there", {"type": "text", "text": None}, ["nested"], {"text": "!"}]
    assert normalize_completion(body_with({"content": parts})).content == "hi there!"
    assert normalize_completion(body_with({"content": [5, None]})).content == ""
    assert normalize_completion(body_with({"content": {"type": "text", "text": "one"}})).content \
        == "one"
    assert normalize_completion(body_with({"content": 10**5000})).content is None


@pytest.mark.parametrize("name", [5, 10**5000, None, ["calc"], {"a": "calc"}, True],
                         ids=["int", "huge-int", "null", "list", "dict", "bool"])
def test_a_name_that_is_not_a_string_is_no_name(name: Any) -> None:
    response = normalize_completion(body_with({"tool_calls": [call("{}", name=name)]}))
    assert response.tool_calls[0].name == ""


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, 1e300, -5, True, 10**400, 2**53, "9" * 5000, "12k", None,
     [1], {"n": 1}],
    ids=["nan", "inf", "-inf", "1e300", "negative", "bool", "10**400", "2**53", "5000-digits",
         "12k", "null", "list", "dict"],
)
def test_usage_that_is_not_a_count_is_zero_and_null_is_unreported(value: Any) -> None:
    usage = {"prompt_tokens": value, "completion_tokens": value,
             "prompt_tokens_details": {"cached_tokens": value}}
    response = normalize_completion(body_with({"content": "x"}, usage=usage))
    counts = (response.usage.prompt_tokens, response.usage.completion_tokens,
              response.usage.cached_tokens)
    assert counts == ((None, None, None) if value is None else (0, 0, 0))  # null: unreported


def test_usage_counts_are_kept() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": "7", "prompt_cache_hit_tokens": 3.0}
    response = normalize_completion(body_with({"content": "x"}, usage=usage))
    assert (response.usage.prompt_tokens, response.usage.completion_tokens,
            response.usage.cached_tokens) == (12, 7, 3)


# -- property: random hostile bodies ------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=20),
    st.integers(), st.integers(min_value=10**300, max_value=10**4000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just("x" * 200_000),
)
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["choices", "message", "content", "tool_calls", "function", "name",
                         "arguments", "usage", "prompt_tokens", "text", "type", "id", "delta",
                         "finish_reason", "function_call", "parameters", "x"]), inner, max_size=4),
    max_leaves=12,
)
deep_values = st.builds(wrap, json_like, st.integers(0, 3000), st.sampled_from(["list", "dict"]))
hostile = st.one_of(json_like, deep_values)
SLOTS = ["body", "choices", "choice", "message", "content", "tool_calls", "call", "function",
         "name", "arguments", "usage", "prompt_tokens", "details"]


def place(value: Any, slot: str) -> Any:
    """A plausible completion with ``value`` put in one of its slots."""
    details = value if slot == "details" else {"cached_tokens": 1}
    usage = value if slot == "usage" else {
        "prompt_tokens": value if slot == "prompt_tokens" else 1, "completion_tokens": 1,
        "prompt_tokens_details": details}
    function = value if slot == "function" else {
        "name": value if slot == "name" else "calc",
        "arguments": value if slot == "arguments" else "{}"}
    item = value if slot == "call" else {"id": "c", "type": "function", "function": function}
    message = value if slot == "message" else {
        "content": value if slot == "content" else "hi",
        "tool_calls": value if slot == "tool_calls" else [item]}
    choice = value if slot == "choice" else {"message": message, "finish_reason": "stop"}
    choices = value if slot == "choices" else [choice]
    return value if slot == "body" else {"choices": choices, "usage": usage}


def check(response: ModelResponse) -> None:
    assert response.content is None or isinstance(response.content, str)
    counts = (response.usage.prompt_tokens, response.usage.completion_tokens,
              response.usage.cached_tokens)
    assert all(c is None for c in counts) or all(  # unreported, or counts
        isinstance(c, int) and 0 <= c < 2**53 for c in counts)
    for parsed in response.tool_calls:
        assert isinstance(parsed.name, str) and isinstance(parsed.raw_arguments, str)
        assert isinstance(parsed.arguments, dict)


@settings(max_examples=300, deadline=None)
@given(hostile, st.sampled_from(SLOTS))
def test_hostile_bodies_raise_only_response_errors(value: Any, slot: str) -> None:
    try:
        response = normalize_completion(place(value, slot))
    except ModelResponseError as exc:
        assert len(str(exc)) < 400
        return
    check(response)


@settings(max_examples=200, deadline=None)
@given(hostile, st.sampled_from(SLOTS))
def test_hostile_bodies_from_the_wire(value: Any, slot: str) -> None:
    """What a server can send: a body that went through JSON, decoded as the client does."""
    try:
        text = json.dumps(place(value, slot))
    except (ValueError, RecursionError):
        return  # no JSON form (an integer past the digit limit, too deep to encode here)
    try:
        body = loads_limited(text, max_depth=MAX_BODY_DEPTH)
    except ValueError:  # refused at decoding: OpenAICompatibleModel turns it into the same
        return
    try:
        response = normalize_completion(body)
    except ModelResponseError as exc:
        # the client skips the second depth walk (loads_limited bounded the body): same error
        with pytest.raises(ModelResponseError) as skipped:
            normalize_completion(body, depth_checked=True)
        assert str(skipped.value) == str(exc)
        return
    assert repr(normalize_completion(body, depth_checked=True)) == repr(response)
    check(response)
    for parsed in response.tool_calls:
        assert not deeper_than(parsed.arguments, MAX_DEPTH)
        json.dumps(parsed.arguments)  # fit to be sent back in the history

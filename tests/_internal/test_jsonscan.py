"""Bounded JSON decoding: loads_limited, decode_arguments under hostile sizes, excerpt."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent._internal.jsonscan import (
    INCOMPLETE,
    MAX_DEPTH,
    JSONLimitError,
    decode_arguments,
    deeper_than,
    excerpt,
    incomplete,
    loads_limited,
    scan_end,
    strip_fences,
    write_json,
)


def nested(depth: int, opener: str = "[", leaf: str = "1") -> str:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return opener * depth + leaf + closer * depth


def deep_value(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def finishes(function: Any, *args: Any, within: float = 60.0) -> Any:
    """Run ``function`` in a thread; fail (instead of hanging the suite) if it never returns."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(function(*args)), daemon=True)
    worker.start()
    worker.join(within)  # a hang check, not a speed requirement
    assert not worker.is_alive(), f"{function.__name__} did not return within {within} s"
    return out[0]


# -- loads_limited ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [nested(5000), nested(5000, '{"a":'), "[" * 100_000])
def test_deeper_than_the_decoder_is_a_limit_error(text: str) -> None:
    with pytest.raises(JSONLimitError, match="nested deeper than 10 levels"):
        loads_limited(text, max_depth=10)
    with pytest.raises(JSONLimitError):
        loads_limited(text.encode(), max_depth=10)


def test_depth_limit_is_exact() -> None:
    assert loads_limited(nested(10), max_depth=10) == deep_value(10)
    with pytest.raises(JSONLimitError, match="nested deeper than 9 levels"):
        loads_limited(nested(10), max_depth=9)
    assert loads_limited("[" * 20 + "]" * 20 + "", max_depth=20)  # 20 brackets, 20 deep
    assert loads_limited('["[[[[[[", "{{{{{{"]', max_depth=1)  # brackets inside strings


@pytest.mark.parametrize("text", ["9" * 5000, '{"n": ' + "9" * 5000 + "}"])
def test_too_many_digits_is_a_limit_error(text: str) -> None:
    with pytest.raises(JSONLimitError, match="a number with more than 4300 digits"):
        loads_limited(text, max_depth=10)


@pytest.mark.parametrize("data", ["", "{]", "nope", b"\xff\xfe\xfa", '{"a": 1} trailing'])
def test_other_failures_are_one_line_value_errors(data: str | bytes) -> None:
    with pytest.raises(ValueError) as caught:
        loads_limited(data, max_depth=10)
    assert not isinstance(caught.value, JSONLimitError)
    assert "\n" not in str(caught.value)


def test_deeper_than_is_iterative() -> None:
    assert deeper_than(deep_value(100_000), 64)
    assert not deeper_than(deep_value(64), 64)
    loop: list[Any] = []
    loop.append(loop)
    assert deeper_than(loop, 1000)


# -- decode_arguments never raises, whatever the size -------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        nested(900, '{"a":'),  # json.loads manages it; nothing after it should have to
        nested(5000, '{"a":'),
        '{"a":' * 5000,  # truncated, and too deep to repair
        "[" * 5000,  # a bare value too deep for the registry's own json.loads
        nested(MAX_DEPTH + 1, '{"a":'),
        '"' + json.dumps(nested(3000, '{"a":'))[1:-1] + '"',  # double-encoded, too deep
    ],
)
def test_deep_arguments_are_an_error(raw: str) -> None:
    args, error = finishes(decode_arguments, raw)
    assert args is None
    assert error is not None and "nested deeper than 64 levels" in error


def test_arguments_at_the_depth_limit_decode() -> None:
    args, error = decode_arguments(nested(MAX_DEPTH, '{"a":'))
    assert error is None and args is not None and not deeper_than(args, MAX_DEPTH)


@pytest.mark.parametrize("raw", ["9" * 5000, '{"n": ' + "9" * 5000 + "}"])
def test_numbers_past_the_digit_limit_are_an_error(raw: str) -> None:
    args, error = decode_arguments(raw)
    assert args is None
    assert error == "invalid JSON: a number with more than 4300 digits"


@pytest.mark.parametrize(
    "raw",
    [
        "{'a': '" + "x" * 5_000_000 + "',}",  # past the repair limit
        "{" + ",".join(f"'k{i}': {i}" for i in range(100_000)) + ",}",
    ],
)
def test_huge_broken_arguments_are_not_repaired(raw: str) -> None:
    args, error = finishes(decode_arguments, raw)
    assert args is None
    assert error is not None and "not repaired: longer than 100000 characters" in error
    # cut off as well: found so by one linear scan, and never repaired either
    assert finishes(decode_arguments, raw[:-2]) == (None, INCOMPLETE)


def test_huge_valid_arguments_still_decode() -> None:
    raw = json.dumps({"text": "x" * 5_000_000})
    assert decode_arguments(raw) == ({"text": "x" * 5_000_000}, None)


OPENERS = st.sampled_from(["[", "{", '{"a":', "{'a':", '{"a": ', "{'a': "])
hostile_text = st.one_of(
    st.builds(lambda d, o: o * d, st.integers(0, 6000), OPENERS),
    st.builds(lambda d: nested(d, '{"a":'), st.integers(0, 3000)),
    st.builds(lambda n, o: o + "9" * n, st.integers(4000, 9000), OPENERS | st.just("")),
    st.builds(lambda d, s: "[" * d + s + "]" * d, st.integers(0, 2000), st.text(max_size=20)),
)


@settings(max_examples=200, deadline=None)
@given(hostile_text)
def test_decode_arguments_never_raises_on_hostile_sizes(raw: str) -> None:
    args, error = decode_arguments(raw)
    assert args is None or (isinstance(args, dict) and not deeper_than(args, MAX_DEPTH))
    assert error is None or args is None
    if args is not None:
        json.dumps(args)  # whatever is decoded can be encoded again


# -- excerpt ------------------------------------------------------------------------------


def test_excerpt_is_json_for_small_values() -> None:
    value = {"a": [1, 2.5, None, True, "x\n"], "b": {}}
    assert excerpt(value) == json.dumps(value)


def test_excerpt_of_hostile_values_is_short() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    for value in [deep_value(200_000), loop, ["x" * 10_000_000], {"n": 10**5000}, [object()]]:
        text = excerpt(value, 100)
        assert len(text) <= 103
    assert excerpt({"n": 10**5000}) == '{"n": <an integer of 16610 bits>}'
    assert excerpt("\ud800 x") == '"\\ud800 x"'  # printable and storable
    assert excerpt(deep_value(3), 5) == "[[[1]..."


_PIECES = st.sampled_from(['{', '}', '[', ']', '"', "'", '\\', ':', ',', ' ', 'a', '1', '"k"',
                           '"v"', 'null', '\\"', "it's", '```', '```json\n', '\n', '{"a": ',
                           '"}"', '巴'])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_incomplete_is_the_scan_whether_or_not_the_text_is_strict_json(text: str) -> None:
    """The strict-JSON shortcut of :func:`incomplete` answers as the bracket scan alone."""
    stripped = strip_fences(text)
    scanned = stripped[:1] in ("{", "[", '"', "'") and scan_end(stripped, 0) is None
    assert incomplete(text) == scanned


_ANY_TEXT = st.text(st.characters(exclude_categories=()))  # lone surrogates too
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ANY_TEXT, inner, max_size=4),
    max_leaves=20)


@given(_JSON_VALUES)
def test_write_json_writes_what_json_dumps_writes(value: Any) -> None:
    """Request bodies are written by :func:`write_json`: the stdlib's text to the character
    (Chinese and lone surrogates kept, ``1e-05``, ``NaN``, ``-0.0``)."""
    assert write_json(value) == json.dumps(value, ensure_ascii=False)


def test_write_json_refuses_what_json_cannot_write() -> None:
    """A value with no JSON form, and a cycle, raise instead of writing half a body; what it
    writes keeps every character (a lone surrogate too: the storable check encodes it)."""
    with pytest.raises(TypeError, match="set has no JSON form"):
        write_json({"a": {1, 2}})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(RecursionError):
        write_json(cycle)
    assert write_json({"city": "北京，上海", "t": 1e-05, "n": float("nan"), "s": "\ud800"}) == (
        '{"city": "北京，上海", "t": 1e-05, "n": NaN, "s": "\ud800"}')

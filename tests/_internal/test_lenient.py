"""The lenient JSON reader: the meaning-keeping repairs it makes, and the guesses it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miniagent._internal.jsonscan import MAX_DEPTH, decode_arguments
from miniagent._internal.lenient import RefusedRepair, loads_lenient


@pytest.mark.parametrize(("raw", "expected"), [
    ("{'to': 'bob', 'n': 2,}", {"to": "bob", "n": 2}),
    ("{'quote': 'it\\'s \"x\"'}", {"quote": "it's \"x\""}),
    ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
    ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}),
    ('{to: "bob", max_tokens: 5}', {"to": "bob", "max_tokens": 5}),
    ('{"a": 1, // why\n "b": 2, /* more */ "c": 3, # python\n}', {"a": 1, "b": 2, "c": 3}),
    ('{"code": "line 1\n\tline 2",}', {"code": "line 1\n\tline 2"}),
    ('{"re": "\\d+\\.\\w", "u": "\\u00e9\\ud83d\\ude00",}', {"re": "\\d+\\.\\w", "u": "é😀"}),
    ('{"x": -1.5e3, "y": 1., "z": -Infinity,}', {"x": -1500.0, "y": 1.0, "z": float("-inf")}),
])
def test_repairs_that_keep_the_meaning(raw: str, expected: dict[str, Any]) -> None:
    assert decode_arguments(raw) == (expected, None)


@pytest.mark.parametrize(("raw", "told"), [
    ('{"to": "bob",, "body": }', "a member is missing between two commas (character 14)"),
    ('{"to": "bob", "body": }', 'the value of "body" is missing, found \'}\' (character 23)'),
    ('{"to": "bob", "body": ,}', 'the value of "body" is missing'),
    ('{"to": "bob", "body"}', "':' is missing after the key \"body\""),
    ('{"to": "bob", : "hi"}', "a key is missing before this ':' (character 15)"),
    ('{, "to": "bob"}', "a member is missing before this ','"),
    ('{"to": [, "bob"]}', "a value is missing before this ','"),
    ('{"to": ["bob",, "ann"]}', "a value is missing between two commas"),
    ('{"to" "bob"}', "':' is missing after the key \"to\""),
    ('{"to": "bob" "body": "hi"}', "',' or '}' expected"),
    ('{"to": ["bob"}, "body": "hi"}', "',' or ']' expected, found '}, \"body"),
    ('{"to": "bob"}, "body": "hi"}', "text after the end of the value"),
    ('{"to": bob}', "'bob' is no JSON value"),
    ('{"ok": tru}', "'tru' is no JSON value"),
    ('{"n": 007}', "not a number"),
    ('{"a": "x" + "y"}', "',' or '}' expected"),
])
def test_what_needs_a_guess_is_refused_saying_what_and_where(raw: str, told: str) -> None:
    arguments, error = decode_arguments(raw)
    assert arguments is None
    assert error is not None and error.startswith("invalid JSON: ") and told in error


def test_too_deep_is_refused_before_recursing() -> None:
    raw = "{'a': " * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)
    with pytest.raises(RefusedRepair, match=f"nested deeper than {MAX_DEPTH} levels"):
        loads_lenient(raw, max_depth=MAX_DEPTH)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.text(), _JSON, max_size=5))
def test_strict_json_reads_as_json_does(value: dict[str, Any]) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert loads_lenient(text, max_depth=MAX_DEPTH) == json.loads(text)


@given(st.dictionaries(st.text(), _JSON, min_size=1, max_size=5))
def test_a_dropped_value_is_never_filled_in(value: dict[str, Any]) -> None:
    """Every member's value removed in turn (``"k": ,``): always refused, never a default."""
    for key in value:
        rest = {k: v for k, v in value.items() if k != key}
        members = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in rest.items()]
        text = "{" + ", ".join([*members, f"{json.dumps(key)}: "]) + "}"
        with pytest.raises(RefusedRepair, match="is missing"):
            loads_lenient(text, max_depth=MAX_DEPTH)

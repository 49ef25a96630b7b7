"""Cutting long texts, marked: any text and any JSON value end within their limit."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent.core.trace.cut import cut_strings, cut_text, fitted_json

TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('\n"\\北京'),
               max_size=3000)
JSON = st.recursive(st.none() | st.integers() | TEXT,
                    lambda inner: st.lists(inner, max_size=8)
                    | st.dictionaries(st.text(max_size=20), inner, max_size=8), max_leaves=40)


@settings(max_examples=200, deadline=None)
@given(TEXT, st.integers(0, 4000))
def test_a_cut_text_is_within_its_limit_and_keeps_its_beginning(text: str, limit: int) -> None:
    cut = cut_text(text, limit)
    assert len(cut) <= limit and (cut == text) == (len(text) <= limit)
    kept = cut.rpartition("... [cut ")[0] if cut != text and "... [cut " in cut else cut
    assert text.startswith(kept)


@settings(max_examples=200, deadline=None)
@given(JSON, st.integers(0, 6000))
def test_fitted_json_is_within_its_limit(value: Any, limit: int) -> None:
    text = fitted_json(value, limit)
    whole = json.dumps(value, ensure_ascii=False)
    assert len(text) <= limit and (text == whole) == (len(whole) <= limit)


def test_fitted_json_stays_json_when_cutting_its_longest_texts_is_enough() -> None:
    value = [{"role": "tool", "content": '"quoted"\n' * 50_000}, {"role": "user",
                                                                 "content": "北京" * 40_000}]
    text = fitted_json(value, 65_536)
    assert 60_000 < len(text) <= 65_536
    first, second = json.loads(text)
    assert first["content"].startswith('"quoted"\n"quoted"') and "[cut " in first["content"]
    assert second["content"].startswith("北京北京") and second["content"].endswith(
        " of 80,000 chars]")


def test_cut_strings_copies_only_what_it_cuts() -> None:
    short = {"a": ["x", {"b": "y"}]}
    value = {"short": short, "long": "z" * 1000}
    cut = cut_strings(value, 100, str.upper)  # "prepare" runs on a long text before its cut
    assert cut["short"] is short and cut["long"].startswith("ZZZ") and len(cut["long"]) <= 100

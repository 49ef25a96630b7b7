"""Long texts cut to a limit, the cut marked: what traces and spans keep of a large value.

A cut text keeps its beginning and ends with a marker saying how much was cut, so a reader
never mistakes it for the whole value::

    >>> cut_text("x" * 100, 50)
    'xxxxxxxxxxxxxxxxxxxxxxxx... [cut 76 of 100 chars]'

Limits count characters (``len``), as OpenTelemetry's attribute length limits do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["cut_strings", "cut_text", "fitted_json"]

_MARK = "... [cut {cut:,} of {total:,} chars]"
_MIN_CAP = 64
"""Strings are not cut shorter than this (room for the marker and some text): when that is not
enough, the JSON text itself is cut."""


def _unchanged(text: str) -> str:
    return text


def cut_text(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its beginning and the marker, at
    most ``limit`` characters in all (no marker when ``limit`` leaves no room for one)."""
    total = len(text)
    if total <= limit:
        return text
    room = limit - len(_MARK.format(cut=total, total=total))  # the longest marker it can need
    if room < 0:
        return text[:limit]
    return text[:room] + _MARK.format(cut=total - room, total=total)


def cut_strings(value: Any, limit: int, prepare: Callable[[str], str] = _unchanged) -> Any:
    """``value`` (JSON-like) with each string (or key) longer than ``limit`` cut; ``prepare``
    runs on such a string first (a redactor: a secret is never split by the cut). Only what
    changes is copied: a long history with no long text costs one walk."""
    if isinstance(value, str):
        return cut_text(prepare(value), limit) if len(value) > limit else value
    if isinstance(value, dict):
        items = [(cut_strings(k, limit, prepare), cut_strings(v, limit, prepare))
                 for k, v in value.items()]
        if all(new[0] is k and new[1] is v for new, (k, v) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        cut = [cut_strings(item, limit, prepare) for item in value]
        return value if all(a is b for a, b in zip(cut, value)) else cut
    return value


def _sizes(value: Any) -> list[tuple[int, int]]:
    """Each string's length and the length it has in JSON (escapes make it longer)."""
    if isinstance(value, str):
        return [(len(value), len(json.dumps(value, ensure_ascii=False)) - 2)]
    if isinstance(value, dict):
        return [size for k, v in value.items() for size in _sizes(k) + _sizes(v)]
    if isinstance(value, (list, tuple)):
        return [size for item in value for size in _sizes(item)]
    return []


def _cap_for(sizes: list[tuple[int, int]], excess: int) -> int:
    """The largest cap at which cutting every longer string takes at least ``excess``
    characters off the JSON text (a cut string keeps its share of escapes)."""
    low, high = _MIN_CAP, max(n for n, _ in sizes)
    while low < high:  # fewer characters go as the cap grows: a binary search
        cap = (low + high + 1) // 2
        if sum(json_n - cap * json_n // n for n, json_n in sizes if n > cap) >= excess:
            low = cap
        else:
            high = cap - 1
    return low


def fitted_json(value: Any, limit: int) -> str:
    """``value`` as JSON text (UTF-8 kept) of at most ``limit`` characters.

    The longest strings are cut first, all to the same length, so the text stays valid JSON
    with each cut marked; only if that cannot make it fit (thousands of short strings) is the
    text itself cut, marked the same way.
    """
    text = json.dumps(value, ensure_ascii=False)
    for _ in range(4):  # escapes (\\n, \\") can leave it long after a cut: a few rounds at most
        sizes = _sizes(value)
        if len(text) <= limit or not sizes:
            break
        value = cut_strings(value, _cap_for(sizes, len(text) - limit))
        text = json.dumps(value, ensure_ascii=False)
    return cut_text(text, limit)

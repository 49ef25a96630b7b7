"""Calls a model wrote in its reply's text instead of the ``tools`` field: the one place that
reads them.

Two shapes are read, on a native request (``native``, and ``auto`` while native):

- **JSON calls** (:func:`json_calls`). Behind llama.cpp's server, Qwen2.5-Coder writes its
  native calls as text: an object naming an offered tool with its arguments, fenced
  (```` ```json ... ``` ````) or not, ``{"name": "calculator", "arguments": {"expression":
  "17 * 23"}}``, or in Qwen/Hermes tags ``<tool_call>{...}</tool_call>`` (one or several).
  ``"parameters"`` is read as the arguments key too, arguments given as a JSON string are
  decoded, and OpenAI's ``{"type": "function", "function": {...}}`` is unwrapped. A bare object
  (one that opens a line) is a call only when it names an offered tool and its arguments are an
  object: other JSON in an answer (its data) stays the answer. A ``<tool_call>`` tag is a call
  and nothing else: one that does not hold a readable call of an offered tool (cut off, a tool
  that was not offered, no object) makes the reply invalid, and the model is told.
- **A ReAct step** (:func:`react_step`, used by ``auto``): line-start ``Action:`` and ``Action
  Input:`` labels, or a ``Final Answer:``.

The cost is bounded: a text longer than :data:`MAX_CONTENT_CHARS` is not searched, at most
:data:`MAX_OBJECTS` objects are decoded, and the scan is one pass (an object never closed ends
it: everything after its opening is inside it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from miniagent._internal.jsonscan import (
    MAX_DEPTH,
    decode_arguments,
    deeper_than,
    loads_limited,
    scan_end,
)
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.types import ParsedOutput, ToolCall

__all__ = ["MAX_CONTENT_CHARS", "MAX_OBJECTS", "ContentCalls", "json_calls", "react_step"]

MAX_CONTENT_CHARS = 100_000
"""Longer text is not searched for calls (a model writes calls of a few hundred characters)."""
MAX_OBJECTS = 16
"""The most JSON values decoded from one reply's text."""

_LABEL = r"(?im)^[ \t>#*_\-]*{}[ \t*]*[:：]"
_ACTION = re.compile(_LABEL.format(r"(?:action|行动|动作)"))
_ACTION_INPUT = re.compile(_LABEL.format(r"(?:action[ \t_]*input|行动输入|动作输入)"))
_FINAL = re.compile(_LABEL.format(r"(?:final[ \t_]*answer|最终答案)"))

_OPEN_TAG = "<tool_call>"
# Where a call may start: after an opening tag (anywhere), or a value opening a line (after
# spaces and an optional fence with its language tag). The lookahead wants the value itself.
_START = re.compile(r"(?P<tag><tool_call>)[ \t\r\n]*(?:```[A-Za-z]*[ \t\r\n]*)?(?=[\[{])"
                    r"|^[ \t]*(?:```[A-Za-z]*[ \t\r\n]*)?(?=[\[{])", re.MULTILINE)
_END = re.compile(r"[ \t\r\n]*(?:```[ \t]*)?(?:[ \t\r\n]*</tool_call>)?")
_ARGUMENT_KEYS = ("arguments", "parameters")


@dataclass
class ContentCalls:
    """What :func:`json_calls` found: the calls and the text around them, or an error."""

    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    """The reply's text without the calls (what the model said besides them)."""
    error: str | None = None
    """Why a ``<tool_call>`` block could not be read (then the reply is invalid)."""


def json_calls(text: str, offered: Collection[str]) -> ContentCalls | None:
    """The calls written as JSON in ``text`` (``<think>`` blocks already removed), or None
    when it holds none: then it is an answer.

    Args:
        text: The reply's visible text.
        offered: The names of the tools the request offered.

    Example:
        >>> found = json_calls('{"name": "calc", "arguments": {"x": "1+1"}}', {"calc"})
        >>> found.calls[0].name, found.calls[0].arguments
        ('calc', {'x': '1+1'})
        >>> json_calls('{"name": "Ann", "arguments": {"x": 1}}', {"calc"}) is None
        True
    """
    if not offered or len(text) > MAX_CONTENT_CHARS or not ("{" in text or _OPEN_TAG in text):
        return None
    found = ContentCalls()
    kept: list[str] = []
    position = scanned = decoded = 0
    for match in _START.finditer(text):
        start, tagged = match.end(), match.group("tag") is not None
        if start < scanned:
            continue  # inside a value already read
        end = scan_end(text, start)
        if end is None:  # never closed: the rest of the text is inside it
            if tagged:
                found.error = "a <tool_call> block is not complete (cut off)"
            break
        scanned, decoded = end, decoded + 1
        calls, error = _read(text[start:end], offered, tagged)
        if error is not None:
            found.error = error
            break
        if calls:
            kept.append(text[position:match.start()])
            found.calls.extend(calls)
            position = scanned = _END.match(text, end).end()  # type: ignore[union-attr]
        if decoded >= MAX_OBJECTS:
            break
    if not found.calls and found.error is None:
        if _OPEN_TAG not in text:
            return None
        found.error = 'a <tool_call> block is not {"name": <tool>, "arguments": {...}}'
    kept.append(text[position:])
    found.text = "".join(kept).strip()
    return found


def _read(raw: str, offered: Collection[str], tagged: bool
          ) -> tuple[list[ToolCall], str | None]:
    """The calls one JSON value holds (an object, or a list of them); an error for a tagged
    value that holds none of an offered tool."""
    value = _decode(raw)
    items = value if isinstance(value, list) else [value]
    calls = [call for item in items if (call := _call(item, offered, tagged)) is not None]
    if tagged and (not calls or len(calls) != len(items)):
        names = sorted({n for item in items if (n := _name(item)) is not None} - set(offered))
        what = (f"names a tool that was not offered ({', '.join(names)})" if names
                else 'is not {"name": <tool>, "arguments": {...}}')
        return [], f"a <tool_call> block {what}"
    return calls, None


def _decode(raw: str) -> Any:
    if raw.startswith("["):
        try:
            return loads_limited(raw, max_depth=MAX_DEPTH)
        except ValueError:
            return None
    return decode_arguments(raw)[0]


def _function(item: Any) -> dict[str, Any] | None:
    """The object naming the tool: ``item``, or its ``function`` (OpenAI's wire shape)."""
    if not isinstance(item, dict):
        return None
    inner = item.get("function")
    return inner if isinstance(inner, dict) and "name" in inner else item


def _name(item: Any) -> str | None:
    function = _function(item)
    name = function.get("name") if function is not None else None
    return name.strip() if isinstance(name, str) else None


def _call(item: Any, offered: Collection[str], tagged: bool) -> ToolCall | None:
    """A call of an offered tool with an arguments object (a tag may leave them out), or
    None."""
    function, name = _function(item), _name(item)
    if function is None or name is None or name not in offered:
        return None
    key = next((k for k in _ARGUMENT_KEYS if k in function), None)
    given = function[key] if key is not None else ({} if tagged else None)
    if isinstance(given, str):
        given = decode_arguments(given)[0]
    if not isinstance(given, dict) or deeper_than(given, MAX_DEPTH):
        return None
    call_id = item.get("id") if isinstance(item, dict) else None
    return ToolCall(id=call_id if isinstance(call_id, str) else "", name=name,
                    arguments=given, raw_arguments=json.dumps(given, ensure_ascii=False))


def react_step(text: str) -> ParsedOutput | None:
    """``text`` read as a ReAct step, if it is a well-formed one (labels at line starts)."""
    action = _ACTION.search(text) is not None and _ACTION_INPUT.search(text) is not None
    if not action and _FINAL.search(text) is None:
        return None
    parsed = parse_react(text)
    return parsed if parsed.kind in ("action", "final") else None

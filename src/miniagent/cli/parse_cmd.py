"""`miniagent parse`: how a raw model output is understood, as JSON (a debugging aid).

Input is decoded as the model client decodes a server's body (:func:`loads_limited`, no
deeper than :data:`MAX_BODY_DEPTH`), so nothing read from stdin reaches recursive code:
every failure is an object with ``error``, which the command prints (exit 1), never a
traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from miniagent._internal.jsonscan import MAX_DEPTH, decode_arguments, loads_limited
from miniagent.core.models.openai_wire import (
    MAX_BODY_DEPTH,
    normalize_completion,
    reported_cached_tokens,
)
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.types import ToolCall

INVALID: dict[str, Any] = {"_invalid": True}


def _react_arguments(call: ToolCall) -> dict[str, Any]:
    if call.arguments_error:
        return dict(INVALID)
    if call.arguments or not call.raw_arguments.strip():
        return call.arguments
    try:  # a bare value: the registry gives it to the tool's single parameter
        return {"_input": loads_limited(call.raw_arguments, max_depth=MAX_DEPTH)}
    except ValueError:
        return {"_input": call.raw_arguments.strip()}


def _native_arguments(call: ToolCall) -> dict[str, Any]:
    if call.arguments_error:
        return dict(INVALID)
    decoded, error = decode_arguments(call.raw_arguments)
    return decoded if isinstance(decoded, dict) and error is None else dict(INVALID)


def parse_react_text(text: str) -> dict[str, Any]:
    parsed = parse_react(text)
    return {
        "kind": parsed.kind,
        "tool_calls": [
            {"name": c.name, "arguments": _react_arguments(c)} for c in parsed.tool_calls
        ],
        "final_answer": parsed.final_answer,
        "thought": parsed.thought,
        "error": parsed.error,
    }


def parse_native_response(body: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"content": None, "tool_calls": [], "cached_tokens": None}
    if not isinstance(body, dict):
        return {**out, "error": "the response body is not a JSON object"}
    try:
        response = normalize_completion(body)
    except Exception as exc:  # a debugging aid must report, not crash
        cached = reported_cached_tokens(body.get("usage"))
        return {**out, "cached_tokens": cached, "error": str(exc)}
    out["content"] = response.content
    out["tool_calls"] = [
        {"name": c.name, "arguments": _native_arguments(c)} for c in response.tool_calls
    ]
    out["cached_tokens"] = reported_cached_tokens(body.get("usage"))
    return out


def parse_native_body(data: str) -> dict[str, Any]:
    try:
        body = loads_limited(data, max_depth=MAX_BODY_DEPTH)
    except ValueError as exc:  # not JSON, or past a limit (too deep, too many digits)
        return {"content": None, "tool_calls": [], "cached_tokens": None,
                "error": f"stdin is not usable JSON: {exc}"}
    return parse_native_response(body)


def parse_jsonl(lines: Iterable[str], *, native_default: bool = False) -> Iterator[dict[str, Any]]:
    """One output object per input line, in order; a bad line gives an object with ``error``."""
    for line in lines:
        if not line.strip():
            yield {"kind": "invalid", "error": "empty line"}
            continue
        try:
            item = loads_limited(line, max_depth=MAX_BODY_DEPTH)
        except ValueError as exc:
            yield {"kind": "invalid", "error": f"line is not usable JSON: {exc}"}
            continue
        if isinstance(item, dict) and "response" in item:
            yield parse_native_response(item["response"])
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            yield parse_react_text(item["text"])
        elif native_default:
            yield parse_native_response(item)
        else:
            yield {"kind": "invalid", "error": "line has neither 'text' nor 'response'"}

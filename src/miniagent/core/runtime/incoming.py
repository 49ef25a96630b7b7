"""What models and tools hand to the step logic, made safe to keep before it enters a session.

Two hazards travel in such data: lone surrogates (``"\\ud800"`` from a JSON escape, or a file
name decoded with ``surrogateescape``), which no UTF-8 store or terminal can encode, and
arguments nested so deep, or numbers so large, that recursive code further on (the loop
detector, JSON encoding, validation) fails. Both are dealt with here, once: surrogates become
U+FFFD, and arguments nested deeper than :data:`MAX_DEPTH` are refused as invalid, so the model
gets an error observation instead of the run a crash.
"""

from __future__ import annotations

import json
from typing import Any

from miniagent._internal.jsonscan import MAX_DEPTH, deeper_than
from miniagent._internal.text import storable
from miniagent.core.types import ModelResponse, Observation, ParsedOutput, ToolCall, replaced


def response(reply: ModelResponse) -> ModelResponse:
    """A model reply with storable text in every field: content, reasoning, finish reason and
    what a trace keeps of the server's body (its top level without ``choices``, which the
    other fields already hold); its calls are admitted once parsed (:func:`parsed`)."""
    changes: dict[str, Any] = {}
    if not _storable_texts(reply.content, reply.reasoning_content, reply.finish_reason):
        for name in ("content", "reasoning_content", "finish_reason"):
            value = getattr(reply, name)
            if isinstance(value, str) and storable(value) is not value:
                changes[name] = storable(value)
    raw = reply.raw
    if isinstance(raw, dict):
        meta = dict(raw)  # copied and cut in C: no loop over the keys
        meta.pop("choices", None)
        if not _storable_value(meta):
            changes["raw"] = {**_storable_copy(meta), "choices": raw.get("choices")}
    return replaced(reply, **changes) if changes else reply


def tool_call(call: ToolCall) -> ToolCall:
    """The call itself when it is fine; otherwise a cleaned copy."""
    too_deep = deeper_than(call.arguments, MAX_DEPTH)
    if not too_deep and _storable_value([call.name, call.raw_arguments, call.id,
                                         call.arguments]):
        return call  # the common case, in one check
    name, raw, call_id = storable(call.name), storable(call.raw_arguments), storable(call.id)
    arguments, error = call.arguments, call.arguments_error
    if too_deep:
        arguments, error = {}, f"the arguments are nested deeper than {MAX_DEPTH} levels"
        raw = raw[:200] + ("..." if len(raw) > 200 else "")
    elif not _storable_value(arguments):
        arguments = _storable_copy(arguments)
    return replaced(call, id=call_id, name=name, raw_arguments=raw, arguments=arguments,
                    arguments_error=error)


def parsed(output: ParsedOutput) -> ParsedOutput:
    """What a protocol made of a reply, every text and call made safe to keep (a parser may
    decode escapes such as ``\\ud800`` into bad text)."""
    if not _storable_texts(output.text, output.thought, output.final_answer, output.error,
                           output.reasoning, output.plain_answer):
        output.text = storable(output.text)
        for name in ("thought", "final_answer", "error", "reasoning", "plain_answer"):
            value = getattr(output, name)
            if value is not None:
                setattr(output, name, storable(value))
    output.tool_calls = [tool_call(call) for call in output.tool_calls]
    return output


def observation(result: Observation) -> Observation:
    """A tool's observation with storable text."""
    output = storable(result.output)
    return result if output is result.output else replaced(result, output=output)


def _storable_texts(*texts: str | None) -> bool:
    """Whether every text given (None counts as none) encodes as UTF-8, checked as one text;
    False too for a value that is not text, which is then left to :func:`storable`."""
    try:
        "".join(filter(None, texts)).encode("utf-8")
    except (UnicodeEncodeError, TypeError):
        return False
    return True


def _storable_copy(value: Any) -> Any:
    """A JSON-like value with every string made storable (through one JSON round trip)."""
    return json.loads(storable(json.dumps(value, ensure_ascii=False, default=repr)))


def _storable_value(value: Any) -> bool:
    """Whether every string (keys too) in a JSON-like value encodes as UTF-8.

    The value is written by the C JSON encoder (keeping every character) and encoded as one
    text: UTF-8 refuses any surrogate, paired or lone, so it encodes exactly when each of its
    strings does. A value the encoder cannot write (a type JSON has no form for, nesting past
    the interpreter's limit) is walked instead."""
    try:
        text = _WRITER.encode(value)
    except (TypeError, ValueError, RecursionError):
        return _walked_storable(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_WRITER = json.JSONEncoder(ensure_ascii=False)
"""Writes a value's strings as they are (``json.dumps`` with an option builds an encoder per
call)."""


def _walked_storable(value: Any) -> bool:
    """:func:`_storable_value` by a walk: the strings are gathered and encoded as one (one
    encoder call instead of one per string)."""
    strings: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    try:
        "".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

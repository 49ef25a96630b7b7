"""The OpenAI wire format of replies: a ``/v1/chat/completions`` body -> :class:`ModelResponse`.

Every model class reads its server's reply here (:func:`normalize_completion`): the HTTP
transport, the embedded model and the scripted one. It tolerates what real servers send:

- arguments as a JSON string, a dict, ``""``, ``null``, broken or double-encoded JSON;
- the legacy ``function_call`` field;
- names with stray whitespace or a trailing colon (``"calc:"``); entries with no name beside
  text content (dropped: the text is the reply);
- two JSON objects glued in one ``arguments`` string (invalid arguments, never one of them);
- missing call ids (left empty: the step logic assigns them from its driver's ids);
- a ``finish_reason`` that contradicts the message (the calls present decide);
- cached prompt tokens as ``prompt_tokens_details.cached_tokens`` or DeepSeek's
  ``prompt_cache_hit_tokens``; no ``usage`` at all (llama.cpp's server when it streams): the
  usage is unknown, not 0 (:meth:`~miniagent.core.types.TokenUsage.unknown`);
- content as a list of parts, of which only the text ones count.

No body shape makes it raise anything but :class:`~miniagent.core.errors.ModelResponseError`:
a body nested deeper than :data:`MAX_BODY_DEPTH` is refused before anything recurses into
it, and the helpers never encode or print a value they have not bounded.
:func:`wire_tool_choice` is the request side's one OpenAI-specific value. How a history and its
tools become the request's messages is the protocol's (:mod:`miniagent.core.protocol.native`).
"""

from __future__ import annotations

from typing import Any

from miniagent._internal.jsonscan import (
    MAX_DEPTH,
    decode_arguments,
    deeper_than,
    excerpt,
    write_json,
)
from miniagent.core.errors import ModelResponseError
from miniagent.core.protocol.base import CHOICE_KEYWORDS
from miniagent.core.types import ModelResponse, TokenUsage, ToolCall

__all__ = ["MAX_BODY_DEPTH", "normalize_completion", "reported_cached_tokens",
           "wire_tool_choice"]

MAX_BODY_DEPTH = 128
"""The deepest nesting of a response body accepted: a completion is about 8 levels deep
around its tool arguments, which may nest :data:`~miniagent._internal.jsonscan.MAX_DEPTH`."""
_MAX_COUNT = 2**53 - 1
"""The largest token count believed (exact as a float, fits SQLite); larger is garbage."""


def wire_tool_choice(choice: str) -> Any:
    """OpenAI's ``tool_choice`` value for a run's choice (``auto``, ``required``, ``none`` or a
    tool's name; see :mod:`miniagent.core.protocol.base`)."""
    if choice in CHOICE_KEYWORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def normalize_completion(body: dict[str, Any], *, depth_checked: bool = False) -> ModelResponse:
    """Turn a ``/v1/chat/completions`` response body into a :class:`ModelResponse`.

    Odd shapes are tolerated (see the module docstring); only a body without
    ``choices[0]``, or one nested deeper than :data:`MAX_BODY_DEPTH`, is an error.

    Args:
        body: The decoded response body.
        depth_checked: ``body`` was decoded by
            :func:`~miniagent._internal.jsonscan.loads_limited` with ``max_depth`` at most
            :data:`MAX_BODY_DEPTH`, so it cannot nest too deeply and is not walked again.

    Raises:
        ModelResponseError: There is no ``choices[0]``, or the body nests too deeply.
    """
    if not depth_checked and deeper_than(body, MAX_BODY_DEPTH):
        raise ModelResponseError(
            f"the response body nests deeper than {MAX_BODY_DEPTH} levels: {excerpt(body)}")
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelResponseError(f"not a chat completion (no choices[0]): {excerpt(body)}")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        delta = choice.get("delta")
        message = delta if isinstance(delta, dict) else {}
    content = _content(message.get("content", choice.get("text")))
    finish = choice.get("finish_reason")
    reasoning = message.get("reasoning_content", message.get("reasoning"))
    return ModelResponse(
        content=content,
        tool_calls=_tool_calls(message, content),
        usage=_usage(body.get("usage")),
        finish_reason=finish if isinstance(finish, str) else None,
        raw=body,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
    )


def _content(value: Any) -> str | None:
    """The text content: None stays None; of a list of parts (or one part), the text ones
    (a plain string, or a dict with a string ``text``) are joined and the rest (images,
    numbers, nulls) skipped; any other value is no content."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        return "".join(text for part in value if (text := _part_text(part)) is not None)
    return None


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    text = part.get("text") if isinstance(part, dict) else None
    return text if isinstance(text, str) else None


def _tool_calls(message: dict[str, Any], content: str | None) -> list[ToolCall]:
    """The message's calls; entries naming no function (or with no function object) are
    dropped when the message has text, which is then the reply (a stray empty entry some
    servers add); without text they stay, and the model is told the name is missing."""
    items, legacy = message.get("tool_calls"), message.get("function_call")
    if not items and not legacy:
        return []  # the common reply: text alone
    raw_items: list[Any] = list(items) if isinstance(items, list) else []
    if isinstance(legacy, dict) and not raw_items:
        raw_items.append({"function": legacy})
    calls = [_tool_call(item) for item in raw_items if isinstance(item, dict)]
    if content and content.strip() and not all(call.name for call in calls):
        calls = [call for call in calls if call.name]
    return calls


def _tool_call(item: dict[str, Any]) -> ToolCall:
    function = item.get("function")
    if not isinstance(function, dict):
        function = item  # flat {"name", "arguments"}, as a few servers send
    name = function.get("name")
    name = name.strip().rstrip(":").strip() if isinstance(name, str) else ""
    raw = function.get("arguments", function.get("parameters"))
    arguments, error, raw_text = _arguments(raw)
    call_id = item.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) else "",
        name=name,
        arguments=arguments,
        raw_arguments=raw_text,
        arguments_error=error,
    )


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None, str]:
    """``(arguments, error, raw text)`` from whatever the server put in ``arguments``."""
    if raw is None:
        return {}, None, ""
    if isinstance(raw, dict):
        if deeper_than(raw, MAX_DEPTH):
            return {}, f"invalid JSON: nested deeper than {MAX_DEPTH} levels", excerpt(raw)
        return raw, None, _dumps(raw)
    text = raw if isinstance(raw, str) else _dumps(raw)
    decoded, error = decode_arguments(text)
    return decoded or {}, error, text


def _dumps(value: Any) -> str:
    """JSON text of a decoded value (depth already bounded); an excerpt when it has no JSON
    form (a number past the digit limit, a non-JSON type from a caller's own dict)."""
    try:
        return write_json(value)
    except (TypeError, ValueError, RecursionError):
        return excerpt(value)


def reported_cached_tokens(usage: Any) -> int | None:
    """Cached prompt tokens as the server reported them (OpenAI's or DeepSeek's spelling),
    or None when it reported none."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    return None if cached is None else _int(cached)


def _usage(usage: Any) -> TokenUsage:
    """The reported counts; unknown (not 0) when the body has no usage or none of its counts."""
    if not isinstance(usage, dict) or (usage.get("prompt_tokens") is None
                                       and usage.get("completion_tokens") is None):
        return TokenUsage.unknown()
    return TokenUsage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=reported_cached_tokens(usage) or 0,
    )


def _int(value: Any) -> int:
    """A token count; anything that is not one (null, "12k", NaN, 1e999, -5, true, 10**400)
    counts as 0, unreported."""
    if type(value) is int and 0 <= value <= _MAX_COUNT:  # what servers send
        return value
    if isinstance(value, bool):
        return 0
    try:
        count = int(value)
    except (TypeError, ValueError, OverflowError):  # null, "12k", nan, inf, 5,000 digits
        return 0
    return count if 0 <= count <= _MAX_COUNT else 0

"""Token counts estimated without a tokenizer: for sizes, and for usage a server did not report.

A server that sends no usage (llama.cpp's server when it streams, some proxies) leaves a model
call's usage unknown (:meth:`~miniagent.core.types.TokenUsage.unknown`). The step logic keeps it
unknown, never 0, and adds an estimate beside it (:func:`with_estimate`), which the token
budget counts: a run whose server never reports usage still ends ``budget_exceeded``.

The estimate is :func:`tokens` of the request's messages and tool definitions (as JSON: the
keys and quotes stand in for the chat template's own tokens) plus the reply's content,
reasoning and tool calls. :func:`tokens` counts ASCII text at 4 characters a token and every
other character as a token of its own: CJK text is about one token a character, where
characters / 4 would count a quarter of it. The step logic has no tokenizer and does no I/O
(it runs inside a Temporal workflow too); a model that can count exactly sets
``estimated_tokens`` on the unknown usage it returns, and that count is kept.

Example:
    >>> tokens("a" * 40), tokens("北京天气" * 10)
    (10, 40)
"""

from __future__ import annotations

import dataclasses
import json

from miniagent._internal.text import tokens
from miniagent.core.types import ModelRequest, ModelResponse

__all__ = ["tokens", "with_estimate"]


def with_estimate(response: ModelResponse, request: ModelRequest) -> ModelResponse:
    """``response``, its unknown usage given an estimate (a copy); as it is otherwise."""
    usage = response.usage
    if usage.known or usage.estimated_tokens:
        return response
    estimated = dataclasses.replace(usage, estimated_tokens=_call_tokens(request, response))
    return dataclasses.replace(response, usage=estimated)


def _call_tokens(request: ModelRequest, response: ModelResponse) -> int:
    sent = json.dumps([request.messages, request.tools or []], ensure_ascii=False, default=str)
    received = [response.content or "", response.reasoning_content or ""]
    for call in response.tool_calls:
        received += [call.name, call.raw_arguments or json.dumps(call.arguments,
                                                                 ensure_ascii=False)]
    return tokens(sent) + sum(tokens(text) for text in received)

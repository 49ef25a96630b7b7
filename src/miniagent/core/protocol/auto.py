"""The ``auto`` protocol: native tool calling, falling back to ReAct where the endpoint refuses it.

It remembers what its endpoint showed: once a request with ``tools`` has succeeded, a later
4xx that mentions tools is an ordinary error (not a refusal); once the endpoint has refused
``tools``, every later request is rendered as ReAct at once. The memory belongs to the
protocol object (one per agent), never to a module.

A native reply whose text is a well-formed ReAct step (line-start ``Action:`` and ``Action
Input:`` labels, or a ``Final Answer:``) is read as that step, never shown whole as the answer;
calls written as JSON in the text are read by the native protocol. Both readers live in
:mod:`miniagent.core.protocol.content`, the one place that reads calls out of a reply's text.
A ReAct action as the first native reply means the server took ``tools`` without showing them
to the model (llama-cpp-python's server does so in its default chat format): the protocol goes
on in ReAct from then on (said once, in the log).

A first native reply that calls no tool is checked the same way against the prompt size the
server reports: when ``prompt_tokens`` is smaller than the messages and the tools need at
:data:`CHARS_PER_TOKEN` characters a token, the tools never reached the model. The reply is not
kept (kind ``retry``): the step asks the same turn again in ReAct, and the protocol stays in
ReAct (said once). The judgment reads only the request and the recorded reply, so a replay
(Temporal) judges the same; it costs no request. A server that reports no usage is not judged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from miniagent.core.errors import ModelError, ModelSwitched, ToolsNotSupported
from miniagent.core.protocol.content import react_step
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.types import Message, ModelRequest, ModelResponse, ParsedOutput, ToolLike

log = logging.getLogger("miniagent")

CHARS_PER_TOKEN = 6
"""More characters of text or tool JSON than any server that shows the tools counts per prompt
token: templates that dump the tools as JSON count 2.5 to 4 (SmolLM2's tokenizer: 88 tokens
for a two-argument tool's 323 characters, 123 for the same indented), OpenAI's compact rendering
about 5 characters of their JSON without the keys it leaves out (:data:`_UNSHOWN_KEYS`) per
token (from the OpenAI cookbook's token counts for tools), English text about 4."""
_UNSHOWN_KEYS = frozenset({"required", "additionalProperties", "$schema", "$id", "$comment",
                           "title", "strict"})
"""Schema keys a compact rendering of tools need not show (``required`` repeats names)."""


class AutoProtocol:
    """Native first; ReAct after the endpoint refused the ``tools`` field, or took it without
    showing the tools to the model.

    Args:
        native_tools: What is known of the endpoint already: True (it takes ``tools``),
            False (it refuses them: render ReAct from the start) or None (find out).
        grammar: Whether the ReAct fallback attaches its grammar.
        max_tokens: The token limit per turn that bounds the fallback's grammar.
        example: Whether the ReAct fallback's prompt shows a worked example.
    """

    name = "auto"

    def __init__(self, *, native_tools: bool | None = None, grammar: bool = True,
                 max_tokens: int | None = None, example: bool = False) -> None:
        self.native_tools = native_tools
        self.react = ReactProtocol(grammar=grammar, max_tokens=max_tokens, example=example)
        self.native = NativeProtocol()
        self._options = {"native_tools": native_tools, "grammar": grammar,
                         "max_tokens": max_tokens, "example": example}

    def options(self) -> dict[str, Any]:
        """What rebuilds this protocol elsewhere: what was known at first, not what it learnt
        since (see :mod:`miniagent.core.protocol.registry`)."""
        return dict(self._options)

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        chosen = self.react if self.native_tools is False else self.native
        return chosen.render(messages, tools, instructions)

    def parse(self, response: ModelResponse, request: ModelRequest) -> ParsedOutput:
        if request.protocol == self.react.name:
            return self.react.parse(response, request)
        parsed = self.native.parse(response, request)
        if not request.tools:
            return parsed
        step = react_step(parsed.text) if parsed.kind == "final" else None
        if step is not None and step.kind == "action":
            if self.native_tools is None:
                log.warning("the model answered a native request with a ReAct action: the "
                            "server takes the tools field without showing it; going on in ReAct")
                self.native_tools = False
            return step
        if self.native_tools is None and parsed.kind != "action":
            unshown = unshown_tools(response, request)
            if unshown is not None:  # not kept: the step asks again, in ReAct
                log.warning("the server took the tools field without showing it to the model "
                            "(%s); going on in ReAct", unshown)
                self.native_tools = False
                return ParsedOutput(kind="retry", text=parsed.text, error="the server did not "
                                    f"show the tools to the model ({unshown})")
        self.native_tools = True  # the endpoint took the tools field (and showed them)
        return step or parsed

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        chosen = self.react if self.native_tools is False else self.native
        return chosen.format_error(error, tools)

    def recover(self, error: ModelError, request: ModelRequest, messages: Sequence[Message],
                tools: Sequence[ToolLike], instructions: str | None = None
                ) -> ModelRequest | None:
        """After a refusal of ``tools`` (and no success before), the same turn as ReAct; after
        a fallback model switched to another model, the same turn for that model (ReAct for
        one without native tools)."""
        if isinstance(error, ModelSwitched):
            self.native_tools = error.native_tools
            return self.render(messages, tools, instructions)
        refused = isinstance(error, ToolsNotSupported) and request.protocol == self.native.name
        if not refused or self.native_tools:
            return None
        self.native_tools = False
        return self.react.render(messages, tools, instructions)


def unshown_tools(response: ModelResponse, request: ModelRequest) -> str | None:
    """Why the reply to ``request`` shows that its tools never reached the model, or None.

    They did not when the server reports fewer prompt tokens (cached ones counted too, for
    servers that report them apart) than the messages and the tools would take at
    :data:`CHARS_PER_TOKEN` characters a token; a server that reports none is not judged.
    """
    usage = response.usage
    seen = (usage.prompt_tokens or 0) + (usage.cached_tokens or 0)
    tools = len(json.dumps(_shown_json(request.tools or []), ensure_ascii=False))
    needed = (tools + _text_chars(request.messages)) // CHARS_PER_TOKEN
    if not 0 < seen < needed:
        return None
    return (f"prompt_tokens {seen:,}, the tools alone need about {tools // CHARS_PER_TOKEN:,}, "
            f"with the messages {needed:,}")


def _shown_json(value: Any, names: bool = False) -> Any:
    """``value`` (tool specs) without :data:`_UNSHOWN_KEYS`; ``names``: it is a ``properties``
    mapping, whose keys are property names, all kept."""
    if isinstance(value, dict):
        return {key: _shown_json(item, key == "properties" and not names)
                for key, item in value.items() if names or key not in _UNSHOWN_KEYS}
    if isinstance(value, list):
        return [_shown_json(item) for item in value]
    return value


def _text_chars(messages: Sequence[dict[str, Any]]) -> int:
    """The characters of the messages' text: contents, and calls' names and arguments."""
    total = 0
    for message in messages:
        content = message.get("content")
        total += len(content) if isinstance(content, str) else 0
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            total += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    return total


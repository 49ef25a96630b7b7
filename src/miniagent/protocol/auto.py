"""The ``auto`` protocol: native tool calling, falling back to ReAct where the endpoint refuses it.

It remembers what its endpoint showed: once a request with ``tools`` has succeeded, a later
4xx that mentions tools is an ordinary error (not a refusal); once the endpoint has refused
``tools``, every later request is rendered as ReAct at once. The memory belongs to the
protocol object (one per agent), never to a module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from miniagent.errors import ModelError, ToolsNotSupported
from miniagent.protocol.native import NativeProtocol
from miniagent.protocol.react import ReactProtocol
from miniagent.types import Message, ModelRequest, ModelResponse, ParsedOutput, ToolLike


class AutoProtocol:
    """Native first; ReAct after the endpoint refused the ``tools`` field.

    Args:
        native_tools: What is known of the endpoint already: True (it takes ``tools``),
            False (it refuses them: render ReAct from the start) or None (find out).
        grammar: Whether the ReAct fallback attaches its grammar.
        max_tokens: The token limit per turn that bounds the fallback's grammar.
    """

    name = "auto"

    def __init__(self, *, native_tools: bool | None = None, grammar: bool = True,
                 max_tokens: int | None = None) -> None:
        self.native_tools = native_tools
        self.react = ReactProtocol(grammar=grammar, max_tokens=max_tokens)
        self.native = NativeProtocol()
        self._options = {"native_tools": native_tools, "grammar": grammar,
                         "max_tokens": max_tokens}

    def options(self) -> dict[str, Any]:
        """What rebuilds this protocol elsewhere: what was known at first, not what it learnt
        since (see :mod:`miniagent.protocol.registry`)."""
        return dict(self._options)

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        chosen = self.react if self.native_tools is False else self.native
        return chosen.render(messages, tools, instructions)

    def parse(self, response: ModelResponse, request: ModelRequest) -> ParsedOutput:
        if request.protocol == self.react.name:
            return self.react.parse(response, request)
        if request.tools:
            self.native_tools = True  # the endpoint took the tools field
        return self.native.parse(response, request)

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        chosen = self.react if self.native_tools is False else self.native
        return chosen.format_error(error, tools)

    def recover(self, error: ModelError, request: ModelRequest, messages: Sequence[Message],
                tools: Sequence[ToolLike], instructions: str | None = None
                ) -> ModelRequest | None:
        """After a refusal of ``tools`` (and no success before), the same turn as ReAct."""
        refused = isinstance(error, ToolsNotSupported) and request.protocol == self.native.name
        if not refused or self.native_tools:
            return None
        self.native_tools = False
        return self.react.render(messages, tools, instructions)

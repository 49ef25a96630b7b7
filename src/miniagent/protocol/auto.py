"""The ``auto`` protocol: native tool calling, falling back to ReAct where the endpoint refuses it.

It remembers what its endpoint showed: once a request with ``tools`` has succeeded, a later
4xx that mentions tools is an ordinary error (not a refusal); once the endpoint has refused
``tools``, every later request is rendered as ReAct at once. The memory belongs to the
protocol object (one per agent), never to a module.

A native reply whose text is a well-formed ReAct step (line-start ``Action:`` and ``Action
Input:`` labels, or a ``Final Answer:``) is read as that step, never shown whole as the answer.
A ReAct action as the first native reply means the server took ``tools`` without showing them
to the model (llama-cpp-python's server does so in its default chat format): the protocol goes
on in ReAct from then on (said once, in the log).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from miniagent.errors import ModelError, ToolsNotSupported
from miniagent.protocol.native import NativeProtocol
from miniagent.protocol.react import ReactProtocol
from miniagent.protocol.react_parser import parse_react
from miniagent.types import Message, ModelRequest, ModelResponse, ParsedOutput, ToolLike

log = logging.getLogger("miniagent")
_LABEL = r"(?im)^[ \t>#*_\-]*{}[ \t*]*[:：]"
_ACTION = re.compile(_LABEL.format(r"(?:action|行动|动作)"))
_ACTION_INPUT = re.compile(_LABEL.format(r"(?:action[ \t_]*input|行动输入|动作输入)"))
_FINAL = re.compile(_LABEL.format(r"(?:final[ \t_]*answer|最终答案)"))


class AutoProtocol:
    """Native first; ReAct after the endpoint refused the ``tools`` field.

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
        since (see :mod:`miniagent.protocol.registry`)."""
        return dict(self._options)

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        chosen = self.react if self.native_tools is False else self.native
        return chosen.render(messages, tools, instructions)

    def parse(self, response: ModelResponse, request: ModelRequest) -> ParsedOutput:
        if request.protocol == self.react.name:
            return self.react.parse(response, request)
        parsed = self.native.parse(response, request)
        step = _react_step(parsed.text) if request.tools and parsed.kind == "final" else None
        if step is None or step.kind == "final":
            if request.tools:
                self.native_tools = True  # the endpoint took the tools field
            return step or parsed
        if self.native_tools is None:
            log.warning("the model answered a native request with a ReAct action: the server "
                        "takes the tools field without showing it; going on in ReAct")
            self.native_tools = False
        return step

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


def _react_step(text: str) -> ParsedOutput | None:
    """``text`` read as a ReAct step, if it is a well-formed one (labels at line starts)."""
    action = _ACTION.search(text) is not None and _ACTION_INPUT.search(text) is not None
    if not action and _FINAL.search(text) is None:
        return None
    parsed = parse_react(text)
    return parsed if parsed.kind in ("action", "final") else None


"""The native tool-calling protocol: OpenAI's ``tools`` field <-> miniagent types.

:class:`NativeProtocol` renders the history as chat messages plus a ``tools`` list and reads
the reply's ``tool_calls`` back (calls a model wrote in its text too). Turning the server's
reply body into a :class:`~miniagent.core.types.ModelResponse` is the model transport's job
(:mod:`miniagent.core.models.openai_wire`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.content import json_calls
from miniagent.core.types import (
    Message,
    ModelRequest,
    ModelResponse,
    ParsedOutput,
    ToolCall,
    ToolLike,
)

__all__ = ["NativeProtocol", "offered_names", "render_message", "strip_think", "tool_spec"]

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_THINK_CLOSE = "</think>"


class NativeProtocol(ActionProtocol):
    """Tool calling through the server's ``tools`` field (OpenAI wire format).

    Example:
        >>> proto = NativeProtocol()
        >>> req = proto.render([Message(role="user", content="2+2?")], [])
        >>> req.messages
        [{'role': 'user', 'content': '2+2?'}]
    """

    name = "native"

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        """Render the history and the tools as a chat completion request.

        Rendering is a pure function of its inputs and message by message, so the
        rendering of a history is a prefix of the rendering of any longer history.

        Args:
            messages: The append-only history.
            tools: The tools the model may call.
            instructions: Sent first as a system message, when given.

        Returns:
            A request with ``tools`` set (None when there are no tools) and no stop words.
        """
        wire: list[dict[str, Any]] = []
        if instructions:
            wire.append({"role": "system", "content": instructions})
        wire.extend(render_message(m) for m in messages)
        specs = [tool_spec(t) for t in tools]
        return ModelRequest(messages=wire, tools=specs or None, stop=None, protocol=self.name)

    def parse(self, response: ModelResponse, request: ModelRequest | None = None) -> ParsedOutput:
        """Classify a response: tool calls -> action; text -> final answer; else invalid.

        Calls the model wrote in its text (a JSON object naming an offered tool, or
        ``<tool_call>`` tags: :func:`~miniagent.core.protocol.content.json_calls`) are its action;
        the text besides them is its thought."""
        text = response.content or ""
        visible = strip_think(text).strip()
        if response.tool_calls:
            return ParsedOutput(
                kind="action",
                thought=visible or None,
                tool_calls=list(response.tool_calls),
                text=text,
            )
        written = json_calls(visible, offered_names(request)) if visible else None
        if written is not None and written.error is not None:
            return ParsedOutput(kind="invalid", error=written.error, text=text)
        if written is not None:
            return ParsedOutput(kind="action", thought=written.text or None,
                                tool_calls=written.calls, text=written.text)
        if visible:
            return ParsedOutput(kind="final", final_answer=visible, text=text)
        return ParsedOutput(kind="invalid", error="empty response", text=text)

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        names = ", ".join(t.name for t in tools) or "none"
        return (f"Your last reply could not be used ({error}). Call one of the tools "
                f"({names}) or reply with your final answer as plain text.")


def offered_names(request: ModelRequest | None) -> frozenset[str]:
    """The names of the tools ``request`` offers in its ``tools`` field."""
    if request is None or not request.tools:
        return frozenset()
    functions = (spec.get("function") for spec in request.tools if isinstance(spec, dict))
    return frozenset(f["name"] for f in functions
                     if isinstance(f, dict) and isinstance(f.get("name"), str))


def tool_spec(tool: ToolLike) -> dict[str, Any]:
    """One entry of the ``tools`` field."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def render_message(message: Message) -> dict[str, Any]:
    """One history message in OpenAI chat format."""
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content or "",
        }
    if message.role == "assistant" and message.tool_calls:
        # "" rather than null: llama-cpp-python's server answers 500 to a null content, and
        # its chatml-function-calling template fails on a missing one; OpenAI accepts "".
        return {
            "role": "assistant",
            "content": message.content or "",
            "tool_calls": [_wire_call(call) for call in message.tool_calls],
        }
    return {"role": message.role, "content": message.content or ""}


def _wire_call(call: ToolCall) -> dict[str, Any]:
    # Re-encoded from the decoded arguments: some servers json.loads them for the chat
    # template and answer 400 to the broken JSON a model may have written.
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def strip_think(text: str) -> str:
    """``text`` without ``<think>...</think>`` blocks (an unclosed one runs to the end).

    A ``</think>`` with no opening tag (the chat template opened it in the prompt)
    drops everything before it.
    """
    close = text.find(_THINK_CLOSE)
    if close != -1 and not 0 <= text.find("<think>") < close:
        text = text[close + len(_THINK_CLOSE) :]
    if "<think>" in text:
        text = _THINK_BLOCK.sub("", text)
    return text

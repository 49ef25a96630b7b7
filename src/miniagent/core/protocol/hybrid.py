"""The ``hybrid`` protocol: a visible thought in text, then a native tool call.

Native tool calling is the stabler way to call a tool; ReAct shows the reasoning. Hybrid keeps
both: the system prompt asks the model to write ``Thought: ...`` in its message content before
it calls a tool through the ``tools`` field. A reasoning model may think in
``reasoning_content`` instead (DeepSeek, vLLM's reasoning parsers, llama.cpp's
``--reasoning-format``). Either is the step's thought; a reply with neither still works.

What the model sent is replayed as it was: the message content byte for byte, the
``reasoning_content`` of each tool-call turn (DeepSeek-style servers refuse a tool-call turn
sent back without it), and the arguments as the model wrote them when they were valid JSON (so
the server's prefix cache sees the same bytes it produced).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from miniagent._internal.jsonscan import MAX_DEPTH, loads_limited
from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.content import json_calls
from miniagent.core.protocol.native import (
    NativeProtocol,
    offered_names,
    render_message,
    strip_think,
    tool_spec,
)
from miniagent.core.types import Message, ModelRequest, ModelResponse, ParsedOutput, ToolLike

__all__ = ["HYBRID_PROMPT", "HybridProtocol", "split_thought"]

HYBRID_PROMPT = (
    "You are a helpful assistant. Solve the user's task step by step with the tools you are "
    "given.\n"
    "Before each tool call, write one or two short sentences starting with 'Thought:' that say "
    "what you know and what you will do next; then call the tool.\n"
    "When you know the answer, reply with the answer itself as plain text, in the language of "
    "the user's question."
)
"""The system prompt's core: it asks for the thought before each call."""

_THOUGHT = re.compile(r"^\s*(?:\*\*)?(?:thought|思考)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*",
                      re.IGNORECASE)
_FINAL = re.compile(r"^\s*(?:\*\*)?final answer(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*",
                    re.IGNORECASE | re.MULTILINE)


def split_thought(text: str) -> tuple[str | None, str]:
    """``(thought, rest)`` of a reply's visible text.

    The thought is what follows a leading ``Thought:`` label, up to a ``Final Answer:`` label,
    a blank line, or else the end of its line; the rest is what comes after (without the
    ``Final Answer:`` label). Text without the label is all rest.

    Example:
        >>> split_thought("Thought: easy\\nFinal Answer: 4")
        ('easy', '4')
        >>> split_thought("4")
        (None, '4')
    """
    label = _THOUGHT.match(text)
    final = _FINAL.search(text)
    if label is None:
        return None, (text[final.end():] if final else text).strip()
    body = text[label.end():]
    final = _FINAL.search(body)
    if final is not None:
        return body[:final.start()].strip() or None, body[final.end():].strip()
    head, blank, tail = body.partition("\n\n")
    if not blank:
        head, _, tail = body.partition("\n")
    return head.strip() or None, tail.strip()


class HybridProtocol(ActionProtocol):
    """A thought in the message text (or ``reasoning_content``), then a native tool call.

    Example:
        >>> proto = HybridProtocol()
        >>> reply = ModelResponse(content="Thought: a sum", reasoning_content=None)
        >>> proto.parse(reply, proto.render([], [])).kind
        'invalid'
    """

    name = "hybrid"

    def __init__(self) -> None:
        self._native = NativeProtocol()

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        """The history as chat messages after a system prompt asking for thoughts, plus
        ``tools``; rendered message by message, so a prefix of the next step's request."""
        system = HYBRID_PROMPT
        if instructions and instructions.strip():
            system += "\n\nInstructions:\n" + instructions.strip()
        wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
        wire.extend(_wire(m) for m in messages)
        specs = [tool_spec(t) for t in tools]
        return ModelRequest(messages=wire, tools=specs or None, stop=None, protocol=self.name)

    def parse(self, response: ModelResponse, request: ModelRequest | None = None) -> ParsedOutput:
        """Tool calls -> an action whose thought is the text's (or the reasoning); text ->
        the final answer (what follows the thought); a thought alone -> invalid. Calls written
        in the text are read as native's are (:mod:`miniagent.core.protocol.content`)."""
        text = response.content or ""
        reasoning = response.reasoning_content or None
        thought, rest = split_thought(strip_think(text).strip())
        if response.tool_calls:
            visible = strip_think(text).strip()
            return ParsedOutput(kind="action", thought=thought or visible or reasoning,
                                tool_calls=list(response.tool_calls), text=text,
                                reasoning=reasoning)
        written = json_calls(strip_think(text).strip(), offered_names(request)) if rest else None
        if written is not None and written.error is None:  # calls written in the text
            said = split_thought(written.text)[0] or written.text or None
            return ParsedOutput(kind="action", thought=said or reasoning, text=written.text,
                                tool_calls=written.calls, reasoning=reasoning)
        if written is not None:
            return ParsedOutput(kind="invalid", error=written.error, thought=thought or reasoning,
                                text=text, reasoning=reasoning)
        if rest:
            return ParsedOutput(kind="final", final_answer=rest, thought=thought or reasoning,
                                text=text, reasoning=reasoning)
        error = "a thought but no tool call and no answer" if thought else "empty response"
        return ParsedOutput(kind="invalid", error=error, thought=thought or reasoning,
                            text=text, reasoning=reasoning)

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        names = ", ".join(t.name for t in tools) or "none"
        return (f"Your last reply could not be used ({error}). Write 'Thought: ...' and call "
                f"one of the tools ({names}), or reply with your final answer as plain text.")


def _wire(message: Message) -> dict[str, Any]:
    """A history message as sent: native's form, with the reasoning of a tool-call turn and
    the arguments as the model wrote them."""
    wire = render_message(message)
    if message.role != "assistant" or not message.tool_calls:
        return wire
    if message.reasoning is not None:
        wire["reasoning_content"] = message.reasoning
    for entry, call in zip(wire["tool_calls"], message.tool_calls):
        if call.arguments_error is None and _is_object(call.raw_arguments):
            entry["function"]["arguments"] = call.raw_arguments
    return wire


def _is_object(raw: str) -> bool:
    """Whether ``raw`` is exactly one JSON object (what a server's template can re-read)."""
    if not raw.lstrip().startswith("{"):
        return False
    try:
        return isinstance(loads_limited(raw, max_depth=MAX_DEPTH), dict)
    except ValueError:  # not JSON, or past a decoding limit
        return False

"""The text ReAct protocol: prompt rendering, stop words and parsing.

The model sees the tools in a system prompt and answers in plain text::

    Thought: ...
    Action: calc
    Action Input: {"expression": "2+3"}

Generation stops at ``Observation:`` (:data:`STOP_WORDS`); the loop runs the tool
and the observation goes back as a user message. Rendering is a pure function of
the append-only history, so the prompt of step *k* is a byte prefix of the prompt
of step *k+1* and servers can reuse their prefix cache.

Parsing lives in :mod:`miniagent.core.protocol.react_parser`, the grammar in
:mod:`miniagent.core.protocol.grammar`; the protocol keeps a bounded cache of grammars per tool set.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.types import (
    Message,
    ModelRequest,
    ModelResponse,
    ParsedOutput,
    ToolCall,
    ToolLike,
)

__all__ = [
    "EXAMPLE_ANSWER",
    "EXAMPLE_PLACEHOLDERS",
    "FORMAT_REMINDER",
    "STOP_WORDS",
    "ReactProtocol",
    "format_error_observation",
    "render_system_prompt",
    "worked_example",
]

STOP_WORDS: list[str] = ["\nObservation:", "\nObservation：", "\n**Observation", "\nobservation:"]
"""Stop sequences for ReAct generation; at most 4, the limit many servers enforce.

The parser cuts at any ``Observation`` label anyway, so these only save tokens and
keep invented observations out of the output.
"""

FORMAT_REMINDER = """\
Thought: <your reasoning about what to do next>
Action: <one tool name>
Action Input: <a JSON object with the tool's arguments>
Observation: <the tool's result, written by the system, never by you>
... (Thought / Action / Action Input / Observation can repeat) ...
Thought: I now know the final answer
Final Answer: <the answer to the user>"""
"""The exact output format, as shown in the system prompt and in format errors."""

_INTRO = (
    "You are a helpful assistant. Solve the user's task step by step. You can use the tools below."
)

_RULES = """\
Rules:
- One Action per turn. Stop right after the Action Input line and wait for the Observation.
- Action must be exactly one of the valid tool names.
- Action Input must be one JSON object with double-quoted keys, matching the tool's input schema.
- Never write an Observation yourself.
- If a tool returns an error, fix the input and try again, or use another tool.
- One call asks about one thing: for two cities, call the tool twice.
- Before the Final Answer, check that it answers the whole question; if a step is missing,
  take it with a tool.
- Use a tool only for what it gives. For general knowledge, words or a simple reply, or when
  no tool has what is needed, write the Thought and the Final Answer from what you know.
- Write the Final Answer in the language of the user's question."""


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_block(tool: ToolLike) -> str:
    description = " ".join((tool.description or "").split()) or "(no description)"
    return f"- {tool.name}: {description}\n  Input: {_compact_json(tool.parameters)}"


def render_system_prompt(tools: Sequence[ToolLike], instructions: str | None = None, *,
                         example: bool = False) -> str:
    """Build the ReAct system prompt.

    Args:
        tools: The tools the model may call.
        instructions: Optional developer instructions, placed after the introduction.
        example: Add a worked example built from the first tool (:func:`worked_example`).

    Returns:
        The prompt text: introduction, instructions, tools with their input schema,
        valid tool names, the exact format, the worked example and the rules.
    """
    parts = [_INTRO]
    if instructions and instructions.strip():
        parts.append("Instructions:\n" + instructions.strip())
    if tools:
        parts.append("Tools:\n" + "\n".join(_tool_block(t) for t in tools))
    else:
        parts.append("Tools: none. Answer directly with a Thought and a Final Answer.")
    parts.append("Valid tool names: " + _names(tools))
    parts.append("Use exactly this format:\n\n" + FORMAT_REMINDER)
    if example and tools:
        parts.append(worked_example(tools[0]))
    parts.append(_RULES)
    return "\n\n".join(parts)


def worked_example(tool: ToolLike) -> str:
    """One whole round with ``tool``, from the question to the Final Answer taken from the
    Observation: what a small model copies best. The values are placeholders built from the
    tool's schema, never from the user's question; the thought names the inputs, so a small
    model writes the values it found there (``with expression=1234 * 5678``) before the Action
    Input, which then copies them. Numbers are shown as ``<number>``, not as a sample value a
    small model would copy instead of the question's."""
    placeholders = _example_arguments(tool.parameters)
    arguments = "{" + ",".join(f"{_compact_json(name)}:{text}"
                               for name, text in placeholders.items()) + "}"
    inputs = ", ".join(f"{name}=..." for name in placeholders)
    return (
        "Example (only the format; the values are made up):\n"
        f"Question: a question that {tool.name} can answer\n"
        f"Thought: I should call {tool.name}{' with ' + inputs if inputs else ''}\n"
        f"Action: {tool.name}\n"
        f"Action Input: {arguments}\n"
        f"Observation: the result of {tool.name}\n"
        "Thought: I now know the final answer\n"
        f"Final Answer: {EXAMPLE_ANSWER}"
    )


EXAMPLE_ANSWER = "the answer, taken from the Observation"
"""The worked example's Final Answer: copied as it is, it is no answer (the step logic says so)."""

_EXAMPLE_VALUES: dict[str, str] = {"string": '"..."', "integer": "<integer>",
                                   "number": "<number>", "boolean": "true", "array": "[]",
                                   "object": "{}"}
EXAMPLE_PLACEHOLDERS: frozenset[str] = frozenset(
    {json.loads(text) if text.startswith('"') else text
     for text in _EXAMPLE_VALUES.values() if text.startswith(('"', "<"))})
"""The worked example's placeholder values that no real argument is (``...``, ``<integer>``,
``<number>``; ``true``, ``[]`` and ``{}`` may well be real): a call whose arguments hold one
copied the example, and is not run (the step logic tells the model to put real values in)."""


def _example_arguments(schema: Any) -> dict[str, str]:
    """A placeholder (as JSON text) for each required property (all of them when none is
    required); an enum shows its first value."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = [n for n in schema.get("required") or [] if n in properties] or list(properties)
    values = {}
    for name in required:
        prop = properties[name] if isinstance(properties[name], dict) else {}
        enum = prop.get("enum")
        kind = prop.get("type")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        values[name] = _compact_json(enum[0]) if isinstance(enum, list) and enum else (
            _EXAMPLE_VALUES.get(kind if isinstance(kind, str) else "string", '"..."'))
    return values


def format_error_observation(error: str, tool_names: Sequence[str]) -> str:
    """The observation sent back when an output was neither an action nor a final answer.

    Args:
        error: What was wrong, e.g. ``ParsedOutput.error``.
        tool_names: The valid tool names.

    Returns:
        A message stating the problem, the exact format and the valid tool names.
    """
    names = ", ".join(tool_names) if tool_names else "(none)"
    return (
        f"Format error: {error.strip().rstrip('.')}.\n"
        f"Reply in exactly this format:\n\n{FORMAT_REMINDER}\n\n"
        f"Valid tool names: {names}\n"
        "Write one Action with its Action Input, or a Thought and a Final Answer."
    )


def _names(tools: Sequence[ToolLike]) -> str:
    return ", ".join(t.name for t in tools) if tools else "(none)"


def _synthesize_action(call: ToolCall) -> str:
    """ReAct text for a call recorded without text (a history from native mode)."""
    if call.arguments or not call.raw_arguments:
        raw = json.dumps(call.arguments, ensure_ascii=False)
    else:
        raw = call.raw_arguments
    return f"Action: {call.name}\nAction Input: {raw}"


def _has_action(content: str) -> bool:
    """Whether assistant text already shows its action (ReAct text, not native prose)."""
    lowered = content.lower()
    return "action" in lowered or "行动" in content


def _wire_message(message: Message) -> dict[str, Any]:
    content = message.content or ""
    if message.role == "tool":
        return {"role": "user", "content": "Observation: " + content}
    if message.role == "assistant" and message.tool_calls and not _has_action(content):
        action = _synthesize_action(message.tool_calls[0])
        content = f"{content.rstrip()}\n{action}" if content.strip() else action
    return {"role": message.role, "content": content}


class ReactProtocol(ActionProtocol):
    """Tool use through text: a system prompt, stop words, a grammar and a forgiving parser.

    Args:
        grammar: Attach a GBNF grammar built from the tools' schemas to every request
            (backends that support constrained decoding then only produce well-formed steps).
        grammar_cache: How many tool sets' grammars to keep.
        max_tokens: The agent's token limit per turn, which bounds the grammar's thought and
            free strings so a whole action fits (see
            :func:`~miniagent.core.protocol.grammar.react_grammar`).
        example: Show a worked example built from the first offered tool in the system
            prompt (:func:`worked_example`). Off by default: a large model needs no example
            and pays its tokens on every step; the embedded model turns it on.

    Example:
        >>> proto = ReactProtocol()
        >>> req = proto.render([Message(role="user", content="Hi")], tools=[])
        >>> req.messages[-1]
        {'role': 'user', 'content': 'Hi'}
        >>> proto.parse(ModelResponse(content="Final Answer: Hello"), req).final_answer
        'Hello'
    """

    name = "react"

    def __init__(self, *, grammar: bool = True, grammar_cache: int = 32,
                 max_tokens: int | None = None, example: bool = False) -> None:
        self.grammar = grammar
        self.max_tokens = max_tokens
        self.example = example
        self._grammars: OrderedDict[tuple[tuple[str, int], ...], tuple[str, list[ToolLike]]] = (
            OrderedDict())
        self._cache_size = max(1, grammar_cache)
        # (instructions, [(name, description, copy of parameters)], prompt) of the last render
        self._last_prompt: tuple[str | None, list[tuple[str, str, Any]], str] | None = None

    def options(self) -> dict[str, Any]:
        """What rebuilds this protocol elsewhere (see :mod:`miniagent.core.protocol.registry`)."""
        return {"grammar": self.grammar, "max_tokens": self.max_tokens,
                "example": self.example}

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        """Render the history into a request; pure and deterministic.

        Args:
            messages: The append-only history. ``tool`` messages become user
                messages ``"Observation: ..."``; assistant messages keep their text
                (or get ``Action`` / ``Action Input`` lines if they only hold calls).
            tools: The tools the model may call, described in the system prompt.
            instructions: Optional developer instructions for the system prompt.

        Returns:
            A :class:`ModelRequest` with wire messages, no ``tools`` field,
            :data:`STOP_WORDS` and (with ``grammar``) the tools' grammar.
        """
        wire = [{"role": "system", "content": self._system_prompt(tools, instructions)}]
        wire.extend(_wire_message(m) for m in messages)
        return ModelRequest(messages=wire, tools=None, stop=list(STOP_WORDS),
                            grammar=self.grammar_for(tools) if self.grammar else None,
                            protocol=self.name)

    def grammar_for(self, tools: Sequence[ToolLike]) -> str:
        """The ReAct grammar for these tools, built once per tool set (it takes ~0.2 ms).

        The key is each tool's name and its schema's identity; an entry keeps its tools alive,
        so an id cannot be reused by another schema while the entry is cached."""
        key = tuple((tool.name, id(tool.parameters)) for tool in tools)
        hit = self._grammars.get(key)
        if hit is not None:
            self._grammars.move_to_end(key)
            return hit[0]
        from miniagent.core.protocol.grammar import react_grammar  # only where a grammar is sent

        grammar = react_grammar(tools, max_tokens=self.max_tokens)
        self._grammars[key] = (grammar, list(tools))
        if len(self._grammars) > self._cache_size:
            self._grammars.popitem(last=False)
        return grammar

    def _system_prompt(self, tools: Sequence[ToolLike], instructions: str | None) -> str:
        """:func:`render_system_prompt`, reused while tools and instructions stay equal.

        Every step of every run of an agent renders the same prompt; comparing the tools with
        the last ones costs a fraction of building it (its JSON encoding of each schema).
        The schemas are compared by value with a copy, so one changed in place is seen.
        """
        specs = [(t.name, t.description, t.parameters) for t in tools]
        last = self._last_prompt  # one read: a render on another thread may replace it
        if last is not None and last[0] == instructions and last[1] == specs:
            return last[2]
        prompt = render_system_prompt(tools, instructions, example=self.example)
        self._last_prompt = (instructions, copy.deepcopy(specs), prompt)
        return prompt

    def parse(self, response: ModelResponse, request: ModelRequest | None = None) -> ParsedOutput:
        """Parse a model response; never raises.

        The text content is parsed with :func:`parse_react`. A server that answered
        with native tool calls and no text is accepted too: its first call is used.

        Args:
            response: The model's response.
            request: The request it answers (unused: every ReAct reply reads the same way).

        Returns:
            The parsed output (``action``, ``final`` or ``invalid``).
        """
        content = response.content or ""
        if not content.strip() and response.tool_calls:
            call = response.tool_calls[0]
            return ParsedOutput(kind="action", tool_calls=[call], text=_synthesize_action(call))
        return parse_react(content)

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        return format_error_observation(error, [t.name for t in tools])

"""A GBNF grammar for the ReAct format, built from the registered tools' schemas.

With the grammar, a server that supports constrained decoding (llama.cpp in-process or
its server's ``grammar`` field, vLLM's structured outputs) can only produce::

    Thought: <one line, no colon>
    Action: <a registered tool name>
    Action Input: <a JSON object valid for THAT tool's schema>

or::

    Thought: <one line, no colon>
    Final Answer: <free text to the end>

so every output parses. The design choices, each for robustness on small models:

- The thought is one line of at most :data:`THOUGHT_MAX_CHARS` characters (fewer for a
  small ``max_tokens``: :func:`thought_bound`) without a colon, so it can never hold
  ``Action:``, ``Final Answer:`` or ``Observation:`` and cannot run away.
- JSON whitespace is at most one space between tokens (no runaway newlines); strings hold no
  raw control characters (escapes are allowed) and are bounded (the schema's ``maxLength``,
  else :func:`string_bound` of the turn's ``max_tokens``), so is every array, so a small model
  cannot write ``17.17.17...`` until its tokens run out.
- Object properties come in a fixed order: required ones first (schema order), then each
  optional one, optionally, in schema order. Extra properties are never produced.
- The grammar ends after the action input, so generation stops there (no invented
  ``Observation``) even without stop words.

The JSON Schema part (:mod:`miniagent.core.protocol.json_grammar`) accepts any schema a tool can
have, including those given to :meth:`Tool.from_schema <miniagent.Tool.from_schema>`: what it
cannot express falls back to the value's type or to any JSON value, never to an invalid
grammar.

Only widely supported GBNF is used (literals, character classes, groups, ``?``/``*``/``+``
and ``{m,n}``), so the same text works with llama.cpp and xgrammar.
"""

from __future__ import annotations

from collections.abc import Sequence

from miniagent.core.protocol.json_grammar import (
    STRING_MAX_CHARS,
    JsonSchemaGrammar,
    gbnf_literal,
    string_bound,
)
from miniagent.core.types import ToolLike

__all__ = ["STRING_MAX_CHARS", "THOUGHT_MAX_CHARS", "JsonSchemaGrammar", "gbnf_literal",
           "react_grammar", "string_bound", "thought_bound"]

THOUGHT_MAX_CHARS = 240
"""The longest thought the grammar admits, in characters."""


def thought_bound(max_tokens: int | None) -> int:
    """The longest thought for a turn of ``max_tokens``: about a quarter of its tokens (a token
    is about four characters, so as many characters as the turn has tokens), between 32 and
    :data:`THOUGHT_MAX_CHARS` characters, so the action still fits after it."""
    if max_tokens is None:
        return THOUGHT_MAX_CHARS
    return max(32, min(THOUGHT_MAX_CHARS, max_tokens))


def react_grammar(tools: Sequence[ToolLike], *, final: bool = True,
                  max_tokens: int | None = None) -> str:
    """Build the GBNF grammar of one ReAct turn for ``tools``.

    Args:
        tools: The registered tools; their names become literal alternatives and their
            ``parameters`` schemas constrain the ``Action Input``.
        final: Admit a Final Answer (False: the turn must be an action; a ``required``
            tool choice). Without tools a final answer is always admitted.
        max_tokens: The turn's token limit: the thought and every string without a
            ``maxLength`` are bounded so that the whole action fits in it
            (:func:`thought_bound`, :func:`string_bound`).

    Returns:
        The grammar text, root rule ``root``. With no tools only a final answer is admitted.
        The arguments follow each tool's structure (properties, types, enums, required
        fields, string lengths, item counts); numeric bounds and patterns are left to
        validation.

    Example:
        >>> from miniagent import tool
        >>> @tool
        ... def echo(text: str) -> str:
        ...     '''Echo the text.'''
        ...     return text
        >>> print(react_grammar([echo]).splitlines()[0])
        root ::= "Thought: " thought "\\n" (action "\\n"? | final)
    """
    builder = JsonSchemaGrammar(string_chars=string_bound(max_tokens))
    actions = [_action(builder, tool) for tool in tools]
    final = final or not actions
    # the action may end with a line break: a model writes `"}` and a line break as one token
    # (Qwen's `"}\n`), and a grammar that ends at the brace forbids that token, so the model
    # stays inside the string instead: {"city":"Shanghai, China, China, China, ..."}
    branches = ('(action "\\n"? | final)' if final else 'action "\\n"?') if actions else "final"
    lines = [
        'root ::= "Thought: " thought "\\n" ' + branches,
        f"thought ::= [^\\n:\\uFF1A]{{1,{thought_bound(max_tokens)}}}",
    ]
    if final:
        lines.append(r'final ::= "Final Answer: " [^ \t\n] [^\x00]*')
    if actions:
        lines.append('action ::= "Action: " (' + " | ".join(actions) + ")")
    rules = builder.render_rules()
    return "\n".join(lines) + ("\n" + rules if rules else "") + "\n"


def _action(builder: JsonSchemaGrammar, tool: ToolLike) -> str:
    """``<name>\\nAction Input: <args>`` for one tool."""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    if "type" not in schema:  # arguments are always an object, whatever else the schema says
        schema = {"type": "object", **schema}
    args = builder.rule_for(schema, f"{tool.name}-args")
    return f"{gbnf_literal(tool.name + chr(10) + 'Action Input: ')} {args}"

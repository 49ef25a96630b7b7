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

- The thought is one line of at most :data:`THOUGHT_MAX_CHARS` characters without a colon,
  so it can never hold ``Action:``, ``Final Answer:`` or ``Observation:`` and cannot run away.
- JSON whitespace is at most one space between tokens (no runaway newlines); strings hold no
  raw control characters (escapes are allowed).
- Object properties come in a fixed order: required ones first (schema order), then each
  optional one, optionally, in schema order. Extra properties are never produced.
- The grammar ends after the action input, so generation stops there (no invented
  ``Observation``) even without stop words.

The JSON Schema converter covers what :mod:`miniagent.tools.schema` generates: objects
(``properties``/``required``, or ``additionalProperties`` as a map), string, integer,
number, boolean, null, ``enum``, ``const``, arrays with ``items``, ``anyOf``/``oneOf``
(``Optional``), type lists, and ``$ref`` into ``$defs`` (recursive models become recursive
rules). Anything else falls back to a generic JSON value.

Only widely supported GBNF is used (literals, character classes, groups, ``?``/``*``/``+``
and ``{m,n}``), so the same text works with llama.cpp and xgrammar.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from miniagent.types import ToolLike

__all__ = ["THOUGHT_MAX_CHARS", "JsonSchemaGrammar", "gbnf_literal", "react_grammar"]

THOUGHT_MAX_CHARS = 240
"""The longest thought the grammar admits, in characters."""

_PRIMITIVES: dict[str, str] = {
    "ws": '" "?',
    "json-char": r'[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "json-string": r'"\"" json-char* "\""',
    "json-int": r'"-"? ("0" | [1-9] [0-9]{0,17})',
    "json-number": r'json-int ("." [0-9]{1,17})? ([eE] [-+]? [0-9]{1,3})?',
    "json-bool": '"true" | "false"',
    "json-null": '"null"',
    "json-array": '"[" ws (json-value (ws "," ws json-value)*)? ws "]"',
    "json-object": (
        '"{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)*)?'
        ' ws "}"'
    ),
    "json-value": ("json-object | json-array | json-string | json-number | json-bool | json-null"),
}
_PRIMITIVE_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "json-string": ("json-char",),
    "json-number": ("json-int",),
    "json-array": ("ws", "json-value"),
    "json-object": ("ws", "json-string", "json-value"),
    "json-value": (
        "json-object",
        "json-array",
        "json-string",
        "json-number",
        "json-bool",
        "json-null",
    ),
}
_TYPE_RULES = {
    "string": "json-string",
    "integer": "json-int",
    "number": "json-number",
    "boolean": "json-bool",
    "null": "json-null",
    "array": "json-array",
    "object": "json-object",
}
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9-]+")


def gbnf_literal(text: str) -> str:
    """Quote ``text`` as a GBNF string literal.

    Example:
        >>> gbnf_literal('say "hi"\\n')
        '"say \\\\"hi\\\\"\\\\n"'
    """
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _json_literal(value: Any) -> str:
    """A GBNF literal matching exactly the compact JSON text of ``value``."""
    return gbnf_literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


class JsonSchemaGrammar:
    """Accumulates GBNF rules for JSON Schemas; one instance builds one grammar.

    Example:
        >>> g = JsonSchemaGrammar()
        >>> g.rule_for({"type": "boolean"}, "flag")
        'json-bool'
        >>> print(g.render_rules())
        json-bool ::= "true" | "false"
    """

    def __init__(self) -> None:
        self._rules: dict[str, str] = {}
        self._by_body: dict[str, str] = {}
        self._defs: dict[str, Any] = {}
        self._ref_rules: dict[str, str] = {}
        self._ref_prefix = "def"
        self._roots: set[str] = set()

    def rule_for(self, schema: Any, hint: str, defs: dict[str, Any] | None = None) -> str:
        """Return the name of a rule matching JSON values valid for ``schema``.

        Args:
            schema: A JSON Schema (the subset listed in the module docstring).
            hint: A readable base for the names of new rules.
            defs: The ``$defs`` that ``$ref`` values point into; they belong to this schema
                alone (two tools may both define a different ``Node``).
        """
        self._defs, self._ref_rules = defs or {}, {}
        self._ref_prefix = _rule_name(f"{hint}-def")
        name = self._visit(schema, _rule_name(hint))
        self._roots.add(name)
        return name

    def add_rule(self, name: str, body: str) -> str:
        """Add ``name ::= body`` (a fresh name if taken; an existing rule if same body)."""
        if body in self._by_body:
            return self._by_body[body]
        unique, n = name, 1
        while unique in self._rules or unique in _PRIMITIVES:
            n += 1
            unique = f"{name}-{n}"
        self._rules[unique] = body
        self._by_body[body] = unique
        return unique

    def render_rules(self) -> str:
        """All rules added so far plus the primitives they use, one per line."""
        used = self._primitives_used()
        lines = [f"{name} ::= {_PRIMITIVES[name]}" for name in _PRIMITIVES if name in used]
        lines.extend(f"{name} ::= {body}" for name, body in self._rules.items())
        return "\n".join(lines)

    def _primitives_used(self) -> set[str]:
        tokens = set(re.findall(r"[a-zA-Z0-9-]+", " ".join(self._rules.values())))
        tokens |= self._roots
        pending = [name for name in _PRIMITIVES if name in tokens]
        used: set[str] = set()
        while pending:
            name = pending.pop()
            if name not in used:
                used.add(name)
                pending.extend(_PRIMITIVE_DEPENDENCIES.get(name, ()))
        return used

    def _visit(self, schema: Any, name: str) -> str:
        if schema is True or not isinstance(schema, dict):
            return "json-value"
        if "$ref" in schema:
            return self._ref(schema["$ref"])
        if "const" in schema:
            return self.add_rule(name, _json_literal(schema["const"]))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.add_rule(name, " | ".join(_json_literal(v) for v in schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._alternatives(schema[key], name)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            return self._visit(all_of[0], name)
        return self._typed(schema, name)

    def _typed(self, schema: dict[str, Any], name: str) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._alternatives([{**schema, "type": k} for k in kind], name)
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, name)
        if kind == "array":
            return self._array(schema, name)
        if isinstance(kind, str) and kind in _TYPE_RULES:
            return _TYPE_RULES[kind]
        return "json-value"

    def _alternatives(self, options: list[Any], name: str) -> str:
        parts = [self._visit(option, f"{name}-{i}") for i, option in enumerate(options)]
        unique = list(dict.fromkeys(parts))
        return unique[0] if len(unique) == 1 else self.add_rule(name, " | ".join(unique))

    def _array(self, schema: dict[str, Any], name: str) -> str:
        items = schema.get("items")
        if items is None or items is True or items == {}:
            return "json-array"
        item = self._visit(items, f"{name}-item")
        return self.add_rule(name, f'"[" ws ({item} (ws "," ws {item})*)? ws "]"')

    def _object(self, schema: dict[str, Any], name: str) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return self._map(schema, name)
        required = [k for k in schema.get("required", []) if k in properties]
        optional = [k for k in properties if k not in required]
        pairs = {
            key: self._pair(key, properties[key], f"{name}-{key}") for key in required + optional
        }
        if required:
            body = ' ws "," ws '.join(pairs[k] for k in required)
            body += "".join(f' (ws "," ws {pairs[k]})?' for k in optional)
        else:
            body = self._optional_only([pairs[k] for k in optional], name)
        return self.add_rule(name, f'"{{" ws {body} ws "}}"')

    def _pair(self, key: str, schema: Any, name: str) -> str:
        value = self._visit(schema, name)
        return f'{_json_literal(key)} ws ":" ws {value}'

    def _optional_only(self, pairs: list[str], name: str) -> str:
        """Optional pairs in a fixed order, any subset, commas only between present ones."""
        rests = [""] * len(pairs)  # rests[i]: a rule for what may follow pairs[i]
        for i in range(len(pairs) - 1, 0, -1):
            follow = f" {rests[i]}" if rests[i] else ""
            rests[i - 1] = self.add_rule(f"{name}-rest", f'(ws "," ws {pairs[i]})?{follow}')
        firsts = [f"{pair} {rest}".strip() for pair, rest in zip(pairs, rests, strict=True)]
        return "(" + " | ".join(firsts) + ")?"

    def _map(self, schema: dict[str, Any], name: str) -> str:
        extra = schema.get("additionalProperties")
        if not isinstance(extra, dict) or not extra:
            if extra is False:
                return self.add_rule(name, '"{" ws "}"')
            return "json-object"
        value = self._visit(extra, f"{name}-value")
        pair = f'json-string ws ":" ws {value}'
        return self.add_rule(name, f'"{{" ws ({pair} (ws "," ws {pair})*)? ws "}}"')

    def _ref(self, ref: Any) -> str:
        prefix = "#/$defs/"
        if not isinstance(ref, str) or not ref.startswith(prefix):
            return "json-value"
        target = ref[len(prefix) :]
        if target not in self._defs:
            return "json-value"
        if target in self._ref_rules:
            return self._ref_rules[target]
        # Reserve the name first so that a recursive definition refers to itself.
        name = _rule_name(f"{self._ref_prefix}-{target}")
        self._ref_rules[target] = name
        self._rules[name] = "PENDING"
        inner = self._visit(self._defs[target], f"{name}-body")
        self._rules[name] = inner
        return name


def _rule_name(hint: str) -> str:
    """A valid GBNF rule name (letters, digits, dashes) derived from ``hint``."""
    name = _NAME_CHARS.sub("-", hint).strip("-").lower()
    return name or "rule"


def react_grammar(tools: Sequence[ToolLike]) -> str:
    """Build the GBNF grammar of one ReAct turn for ``tools``.

    Args:
        tools: The registered tools; their names become literal alternatives and their
            ``parameters`` schemas constrain the ``Action Input``.

    Returns:
        The grammar text, root rule ``root``. With no tools only a final answer is admitted.
        The arguments follow each tool's structure (properties, types, enums, required
        fields); numeric bounds, string lengths and patterns are left to validation.

    Example:
        >>> from miniagent import tool
        >>> @tool
        ... def echo(text: str) -> str:
        ...     '''Echo the text.'''
        ...     return text
        >>> print(react_grammar([echo]).splitlines()[0])
        root ::= "Thought: " thought "\\n" (action | final)
    """
    builder = JsonSchemaGrammar()
    actions = [_action(builder, tool) for tool in tools]
    lines = [
        'root ::= "Thought: " thought "\\n" ' + ("(action | final)" if actions else "final"),
        f"thought ::= [^\\n:\\uFF1A]{{1,{THOUGHT_MAX_CHARS}}}",
        r'final ::= "Final Answer: " [^ \t\n] [^\x00]*',
    ]
    if actions:
        lines.append('action ::= "Action: " (' + " | ".join(actions) + ")")
    rules = builder.render_rules()
    return "\n".join(lines) + ("\n" + rules if rules else "") + "\n"


def _action(builder: JsonSchemaGrammar, tool: ToolLike) -> str:
    """``<name>\\nAction Input: <args>`` for one tool."""
    schema = tool.parameters
    defs = schema.get("$defs") if isinstance(schema, dict) else None
    args = builder.rule_for(schema, f"{tool.name}-args", defs if isinstance(defs, dict) else None)
    return f"{gbnf_literal(tool.name + chr(10) + 'Action Input: ')} {args}"

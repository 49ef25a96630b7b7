"""GBNF grammars: one ReAct turn (:func:`react_grammar`), and JSON Schema rules
(:class:`JsonSchemaGrammar`) for its ``Action Input`` and the embedded model's native calls.

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

The JSON Schema rules (:class:`JsonSchemaGrammar`) take any schema a tool can have, those given
to :meth:`Tool.from_schema <miniagent.Tool.from_schema>` too, and admit JSON text that fits its
structure, so a constrained model writes arguments that parse and (nearly always) validate.
What the rules guarantee:

- Every schema gives a grammar llama.cpp and xgrammar both accept: only literals, character
  classes, groups, ``?``/``*``/``+`` and ``{m,n}``; rule names are ``[a-z0-9-]`` and unique
  (a name taken by another rule, another tool's definitions, a primitive or the ReAct rules
  gets a numbered suffix); ``$ref`` cycles that would make a rule start with itself (left
  recursion, which llama.cpp refuses) fall back to any JSON value.
- Keys and enum values are exact JSON literals (quotes, backslashes, control characters and
  non-ASCII text all escaped as needed).
- Nothing a schema forbids by structure is produced: properties come in a fixed order,
  required ones first (``required`` order), then each optional one, optionally, in schema
  order; extra properties never; a property whose schema is ``false`` never.

What is understood: ``type`` (and type lists), ``properties``/``required`` (required names
without a property schema take the ``additionalProperties`` one), ``additionalProperties``
(a map when there are no properties), ``enum``/``const`` (filtered by ``type``), ``items``,
``prefixItems`` (and the older tuple form of ``items``), ``minItems`` of one or more,
``maxLength``/``minLength`` of strings and ``maxItems`` of arrays (every free string is bounded
by :data:`STRING_MAX_CHARS`, every array and free-form object by :data:`ITEMS_MAX`, so a
constrained model cannot fill its whole ``max_tokens`` inside one value),
``anyOf``/``oneOf`` (with sibling keywords merged into each alternative), ``allOf`` (merged),
and ``$ref`` to any JSON pointer inside the schema (``#/$defs/..``, ``#/definitions/..``,
``#``), recursive ones becoming recursive rules. Anything else (``pattern``, ``format``,
numeric bounds, ``not``, ``if``...) is left to validation: the value falls back to its
type's rule or to any JSON value, never to an invalid grammar.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from miniagent.core.types import ToolLike

__all__ = ["ITEMS_MAX", "MISSING", "PRIMITIVES", "RESERVED_NAMES", "STRING_MAX_CHARS",
           "THOUGHT_MAX_CHARS", "JsonSchemaGrammar", "gbnf_literal", "local_ref",
           "react_grammar", "string_bound", "thought_bound"]

STRING_MAX_CHARS = 512
"""The longest string the grammar admits where the schema sets no ``maxLength`` (and no lower
bound is chosen for the request's ``max_tokens``: :func:`string_bound`): a small model cannot
spend its whole ``max_tokens`` inside one string (``17.17.17...``)."""
STRING_LIMIT = 4096
"""The longest string admitted even where a schema's ``maxLength`` allows more."""
ITEMS_MAX = 64
"""The most items of an array, or members of a free-form object, the grammar admits where the
schema sets no ``maxItems``."""

PRIMITIVES: dict[str, str] = {
    "ws": '" "?',
    "json-char": r'[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "json-string": rf'"\"" json-char{{0,{STRING_MAX_CHARS}}} "\""',  # see JsonSchemaGrammar
    "json-int": r'"-"? ("0" | [1-9] [0-9]{0,17})',
    "json-number": r'json-int ("." [0-9]{1,17})? ([eE] [-+]? [0-9]{1,3})?',
    "json-bool": '"true" | "false"',
    "json-null": '"null"',
    "json-array": f'"[" ws (json-value (ws "," ws json-value){{0,{ITEMS_MAX - 1}}})? ws "]"',
    "json-object": (
        '"{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)'
        f'{{0,{ITEMS_MAX - 1}}})? ws "}}"'
    ),
    "json-value": "json-object | json-array | json-string | json-number | json-bool | json-null",
}
"""The shared JSON rules, by name."""

RESERVED_NAMES = frozenset({"root", "thought", "final", "action", *PRIMITIVES})
"""Rule names a schema's rules never take (the ReAct grammar's own and the primitives)."""

_PRIMITIVE_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "json-string": ("json-char",),
    "json-number": ("json-int",),
    "json-array": ("ws", "json-value"),
    "json-object": ("ws", "json-string", "json-value"),
    "json-value": (
        "json-object", "json-array", "json-string", "json-number", "json-bool", "json-null",
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
_ANY = "json-value"
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')  # literals, character classes
# Keywords that do not constrain a value: siblings made only of these change nothing.
_ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
    "writeOnly", "$id", "$schema", "$anchor", "$defs", "definitions", "format",
})
_MISSING = object()
MISSING = _MISSING
"""What :func:`local_ref` gives for a reference that points nowhere in the document."""


def string_bound(max_tokens: int | None) -> int:
    """The longest free string for a turn of ``max_tokens``: half of it (a digit or a dot can
    be one token each), between 64 and :data:`STRING_MAX_CHARS` characters, so the thought,
    the action and the closing of its input still fit."""
    if max_tokens is None:
        return STRING_MAX_CHARS
    return max(64, min(STRING_MAX_CHARS, max_tokens // 2))


def gbnf_literal(text: str) -> str:
    """Quote ``text`` as a GBNF string literal (control characters as ``\\xHH``).

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
    # a NUL would end the C string llama.cpp parses; other control bytes are escaped alike
    escaped = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02X}", escaped)
    return f'"{escaped}"'


def _json_literal(value: Any) -> str:
    """A GBNF literal matching exactly the compact JSON text of ``value``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only its \\u escape can be written
        text = json.dumps(value, separators=(",", ":"))
    return gbnf_literal(text)


class JsonSchemaGrammar:
    """Accumulates GBNF rules for JSON Schemas; one instance builds one grammar.

    Example:
        >>> g = JsonSchemaGrammar()
        >>> g.rule_for({"type": "boolean"}, "flag")
        'json-bool'
        >>> print(g.render_rules())
        json-bool ::= "true" | "false"
    """

    def __init__(self, *, string_chars: int = STRING_MAX_CHARS,
                 taken: Iterable[str] = ()) -> None:
        self.string_chars = string_chars
        """The longest string where a schema sets no ``maxLength``."""
        self._taken = frozenset(taken) - set(PRIMITIVES)
        """Names of a grammar these rules join (a typed answer's, into a ReAct turn's)."""
        self._rules: dict[str, str] = {}
        self._by_body: dict[str, str] = {}
        self._roots: set[str] = set()
        self._document: Any = {}
        self._ref_rules: dict[str, str] = {}
        self._ref_prefix = "def"
        self._unconsumed: tuple[str, ...] = ()  # refs entered since the last "{" or "["
        self._inlined: tuple[str, ...] = ()  # refs merged into an allOf, up the whole stack

    def rule_for(self, schema: Any, hint: str, defs: dict[str, Any] | None = None) -> str:
        """Return the name of a rule matching JSON values valid for ``schema``.

        Args:
            schema: A JSON Schema; ``$ref`` pointers resolve inside it.
            hint: A readable base for the names of new rules.
            defs: ``$defs`` to resolve ``#/$defs/...`` in instead of the schema's own; they
                belong to this schema alone (two tools may both define a different ``Node``).
        """
        document = schema if isinstance(schema, dict) else {}
        self._document = document if defs is None else {**document, "$defs": defs}
        self._ref_rules, self._unconsumed, self._inlined = {}, (), ()
        self._ref_prefix = _rule_name(f"{hint}-def")
        name = self._visit(schema, _rule_name(hint)) or _ANY
        self._roots.add(name)
        return name

    def add_rule(self, name: str, body: str) -> str:
        """Add ``name ::= body`` (a fresh name if taken; an existing rule if same body)."""
        if body in self._by_body:
            return self._by_body[body]
        unique = self._reserve(name)
        self._rules[unique] = body
        self._by_body[body] = unique
        return unique

    def render_rules(self) -> str:
        """All rules added so far plus the primitives they use, one per line."""
        used = self._primitives_used()
        lines = [f"{name} ::= {self._primitive(name)}" for name in PRIMITIVES if name in used]
        lines.extend(f"{name} ::= {body}" for name, body in self._rules.items())
        return "\n".join(lines)

    def _primitive(self, name: str) -> str:
        if name == "json-string":
            return rf'"\"" json-char{{0,{self.string_chars}}} "\""'
        return PRIMITIVES[name]

    def _reserve(self, hint: str) -> str:
        """A valid rule name from ``hint`` that no rule, primitive or ReAct rule has."""
        name = _rule_name(hint)
        unique, n = name, 1
        while unique in self._rules or unique in RESERVED_NAMES or unique in self._taken:
            n += 1
            unique = f"{name}-{n}"
        return unique

    def _primitives_used(self) -> set[str]:
        bodies = _QUOTED.sub(" ", " ".join(self._rules.values()))
        tokens = set(re.findall(r"[a-zA-Z0-9-]+", bodies)) | self._roots
        pending = [name for name in PRIMITIVES if name in tokens]
        used: set[str] = set()
        while pending:
            name = pending.pop()
            if name not in used:
                used.add(name)
                pending.extend(_PRIMITIVE_DEPENDENCIES.get(name, ()))
        return used

    @contextmanager
    def _consumed(self) -> Iterator[None]:
        """Inside a ``{`` or ``[``: a reference back to an enclosing rule is fine there."""
        saved, self._unconsumed = self._unconsumed, ()
        try:
            yield
        finally:
            self._unconsumed = saved

    # -- schemas -----------------------------------------------------------------------
    # Each returns a rule name, or None when no value is valid (a ``false`` schema).

    def _visit(self, schema: Any, name: str) -> str | None:
        if not isinstance(schema, dict):
            return None if schema is False else _ANY
        if "$ref" in schema:
            if _constraints(schema, "$ref"):  # 2020-12: siblings apply too
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                parts: list[Any] = _list(rest.get("allOf"))
                return self._all_of({**rest, "allOf": [{"$ref": schema["$ref"]}, *parts]}, name)
            return self._ref(schema["$ref"])
        if isinstance(schema.get("allOf"), list):
            return self._all_of(schema, name)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                siblings = {k: v for k, v in schema.items() if k != key}
                if not _constraints(siblings):
                    return self._alternatives(schema[key], name)
                options = [_merge(siblings, o if isinstance(o, dict) else {}) if o is not False
                           else o for o in schema[key]]
                return self._alternatives(options, name)
        if "const" in schema or isinstance(schema.get("enum"), list):
            return self._enum(schema, name)
        return self._typed(schema, name)

    def _enum(self, schema: dict[str, Any], name: str) -> str | None:
        members = [schema["const"]] if "const" in schema else schema["enum"]
        kinds = _type_list(schema.get("type"))
        if kinds is not None:
            members = [m for m in members if any(_has_type(m, k) for k in kinds)]
        literals = list(dict.fromkeys(_json_literal(m) for m in members))
        return self.add_rule(name, " | ".join(literals)) if literals else None

    def _typed(self, schema: dict[str, Any], name: str) -> str | None:
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._alternatives([{**schema, "type": k} for k in kind], name)
        if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
            return self._object(schema, name)
        if kind == "array":
            return self._array(schema, name)
        if kind == "string":
            return self._string(schema, name)
        if isinstance(kind, str) and kind in _TYPE_RULES:
            return _TYPE_RULES[kind]
        return _ANY

    def _string(self, schema: dict[str, Any], name: str) -> str:
        """A string of at most ``maxLength`` characters (capped), else :data:`STRING_MAX_CHARS`."""
        most, least = _count(schema.get("maxLength")), _count(schema.get("minLength")) or 0
        if most is None and not least:
            return "json-string"
        most = min(STRING_LIMIT, most if most is not None else max(self.string_chars, least))
        return self.add_rule(name, rf'"\"" json-char{{{min(least, most)},{most}}} "\""')

    def _alternatives(self, options: list[Any], name: str) -> str | None:
        found = [self._visit(option, f"{name}-{i}") for i, option in enumerate(options)]
        unique = list(dict.fromkeys(rule for rule in found if rule is not None))
        if not unique:
            return None
        if _ANY in unique:
            return _ANY
        return unique[0] if len(unique) == 1 else self.add_rule(name, " | ".join(unique))

    def _all_of(self, schema: dict[str, Any], name: str) -> str | None:
        """``allOf`` merged into one schema; a ``$ref`` part is inlined (once per chain)."""
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        inlined: list[str] = []
        for part in _list(schema.get("allOf")):
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                pointer = _pointer(part["$ref"])
                if pointer is not None and pointer in self._inlined:
                    return self._ref(part["$ref"])  # a cycle: the named rule, as a whole
                target = _MISSING if pointer is None else _lookup(self._document, pointer)
                if pointer is None or target is _MISSING:
                    continue  # remote or nowhere: left to validation
                inlined.append(pointer)
                rest = {k: v for k, v in part.items() if k != "$ref"}
                part = _merge(target, rest) if isinstance(target, dict) else target
            if part is False:
                return None
            if isinstance(part, dict):
                merged = _merge(merged, part)
        saved = self._inlined
        self._inlined = (*saved, *inlined)
        try:
            return self._visit(merged, name)
        finally:
            self._inlined = saved

    def _object(self, schema: dict[str, Any], name: str) -> str:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        extra = schema.get("additionalProperties")
        required = [k for k in _string_list(schema.get("required"))
                    if k in properties or extra is not False]
        optional = [k for k in properties if k not in required and properties[k] is not False]
        if not required and not optional:
            return self._map(schema, name)
        with self._consumed():
            pairs = {k: self._pair(k, properties.get(k, extra), f"{name}-{k}", k in required)
                     for k in required + optional}
        present = {k: pair for k, pair in pairs.items() if pair is not None}
        if required:
            body = ' ws "," ws '.join(present[k] for k in required)
            body += "".join(f' (ws "," ws {present[k]})?' for k in optional if k in present)
        else:
            body = self._optional_only([present[k] for k in optional if k in present], name)
        return self.add_rule(name, f'"{{" ws {body} ws "}}"')

    def _pair(self, key: str, schema: Any, name: str, required: bool) -> str | None:
        value = self._visit(True if schema is None else schema, name)
        if value is None:
            if not required:
                return None
            value = _ANY  # nothing is valid: let validation tell the model
        return f'{_json_literal(key)} ws ":" ws {value}'

    def _optional_only(self, pairs: list[str], name: str) -> str:
        """Optional pairs in a fixed order, any subset, commas only between present ones."""
        if not pairs:
            return ""
        rests = [""] * len(pairs)  # rests[i]: a rule for what may follow pairs[i]
        for i in range(len(pairs) - 1, 0, -1):
            follow = f" {rests[i]}" if rests[i] else ""
            rests[i - 1] = self.add_rule(f"{name}-rest", f'(ws "," ws {pairs[i]})?{follow}')
        firsts = [f"{pair} {rest}".strip() for pair, rest in zip(pairs, rests, strict=True)]
        return "(" + " | ".join(firsts) + ")?"

    def _map(self, schema: dict[str, Any], name: str) -> str:
        extra = schema.get("additionalProperties")
        if extra is False and not schema.get("patternProperties"):
            return self.add_rule(name, '"{" ws "}"')
        if not isinstance(extra, dict) or not _constraints(extra):
            return "json-object"
        with self._consumed():
            value = self._visit(extra, f"{name}-value")
        if value is None:
            return self.add_rule(name, '"{" ws "}"')
        pair = f'json-string ws ":" ws {value}'
        more = f"{{0,{ITEMS_MAX - 1}}}"
        return self.add_rule(name, f'"{{" ws ({pair} (ws "," ws {pair}){more})? ws "}}"')

    def _array(self, schema: dict[str, Any], name: str) -> str:
        items = schema.get("items")
        prefix: Any = schema.get("prefixItems")
        rest: Any = items
        if isinstance(items, list):  # drafts before 2020-12: a tuple, then additionalItems
            prefix, rest = items, schema.get("additionalItems")
        with self._consumed():
            heads, cut = self._prefix(prefix if isinstance(prefix, list) else [], name)
            item = None if rest is False or cut else self._visit(
                True if rest is None else rest, f"{name}-item")
        bound = _count(schema.get("maxItems"))
        most = ITEMS_MAX if bound is None else min(bound, ITEMS_MAX)
        if most == 0:
            item = None
        if heads:
            more = f' (ws "," ws {item}){{0,{most}}}' if item is not None else ""
            return self.add_rule(name, f'"[" ws {heads}{more} ws "]"')
        if item is None:
            return self.add_rule(name, '"[" ws "]"')
        non_empty = isinstance(schema.get("minItems"), int) and schema["minItems"] >= 1
        if item == _ANY and not non_empty and most == ITEMS_MAX:
            return "json-array"
        items_text = f'{item} (ws "," ws {item}){{0,{most - 1}}}' if most > 1 else item
        body = items_text if non_empty else f"({items_text})?"
        return self.add_rule(name, f'"[" ws {body} ws "]"')

    def _prefix(self, schemas: list[Any], name: str) -> tuple[str, bool]:
        """The tuple part of an array, every position given (a valid choice), in order;
        and whether it is cut short by a position no value fits (nothing may follow)."""
        rules: list[str] = []
        for i, schema in enumerate(schemas):
            rule = self._visit(schema, f"{name}-{i}")
            if rule is None:
                return ' ws "," ws '.join(rules), True
            rules.append(rule)
        return ' ws "," ws '.join(rules), False

    def _ref(self, ref: Any) -> str | None:
        pointer = _pointer(ref)
        target = _MISSING if pointer is None else _lookup(self._document, pointer)
        if target is _MISSING:
            return _ANY  # remote, anchors, or nowhere: validation decides
        if pointer is None or not isinstance(target, dict):
            return None if target is False else _ANY
        if pointer in self._unconsumed:
            return _ANY  # the rule would start with itself (left recursion)
        if pointer in self._ref_rules:
            return self._ref_rules[pointer]
        # Reserve the name first so that a recursive definition refers to itself.
        last = pointer.rsplit("/", 1)[-1] or "root"
        name = self._reserve(f"{self._ref_prefix}-{last}")
        self._ref_rules[pointer] = name
        self._rules[name] = "PENDING"
        saved, self._unconsumed = self._unconsumed, (*self._unconsumed, pointer)
        try:
            inner = self._visit(target, f"{name}-body")
        finally:
            self._unconsumed = saved
        self._rules[name] = inner or _ANY
        return name


# -- helpers -----------------------------------------------------------------------------


def _rule_name(hint: str) -> str:
    """A valid GBNF rule name (letters, digits, dashes) derived from ``hint``."""
    name = _NAME_CHARS.sub("-", hint).strip("-").lower()
    return name or "rule"


def local_ref(document: Any, ref: Any) -> Any:
    """What a same-document ``$ref`` (``"#/$defs/A"``) points to in ``document``, or
    :data:`MISSING` (a remote reference, an anchor, or nothing there)."""
    pointer = _pointer(ref)
    return _MISSING if pointer is None else _lookup(document, pointer)


def _pointer(ref: Any) -> str | None:
    """The JSON pointer of a same-document ``$ref`` (``"#/$defs/A"`` -> ``"/$defs/A"``)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    pointer = unquote(ref[1:])
    return pointer if pointer == "" or pointer.startswith("/") else None


def _lookup(document: Any, pointer: str) -> Any:
    node = document
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _constraints(schema: dict[str, Any], *ignored: str) -> bool:
    """Whether ``schema`` has keywords other than annotations (and ``ignored``)."""
    return any(k not in _ANNOTATIONS and k not in ignored for k in schema)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Both schemas' constraints in one (approximately: the grammar only needs a subset)."""
    out = dict(base)
    for key, value in extra.items():
        mine = out.get(key)
        if key == "properties" and isinstance(mine, dict) and isinstance(value, dict):
            out[key] = {**mine, **{k: {"allOf": [mine[k], v]} if k in mine else v
                                   for k, v in value.items()}}
        elif key == "required" and isinstance(mine, list) and isinstance(value, list):
            out[key] = list(dict.fromkeys([*mine, *value]))
        elif key == "type" and mine is not None:
            out[key] = _type_intersection(mine, value)
        else:
            out[key] = value
    return out


def _type_intersection(a: Any, b: Any) -> Any:
    left, right = _type_list(a), _type_list(b)
    if left is None or right is None:
        return b
    both = [k for k in left if k in right or (k == "integer" and "number" in right)]
    both += [k for k in right if k == "integer" and "number" in left and k not in both]
    if not both:
        return b  # contradictory: nothing is valid, validation will say so
    return both[0] if len(both) == 1 else both


def _type_list(kind: Any) -> list[str] | None:
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return list(kind)
    return None


def _count(value: Any) -> int | None:
    """A length bound of a schema (``maxLength``, ``minItems``...): a non-negative int, else
    None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _string_list(value: Any) -> list[str]:
    return list(dict.fromkeys(k for k in _list(value) if isinstance(k, str)))


def _has_type(value: Any, kind: str) -> bool:
    checks = {
        "string": isinstance(value, str),
        "integer": (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and value.is_integer()),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
    }
    return checks.get(kind, True)


# -- the ReAct turn ----------------------------------------------------------------------

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

"""The ReAct GBNF grammar: structure, and what it accepts and rejects.

A tiny backtracking GBNF matcher (below) checks texts against the generated grammar
without llama.cpp; when llama-cpp-python is installed, llama.cpp must also accept the
grammar text.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from miniagent import tool
from miniagent.protocol.grammar import (
    THOUGHT_MAX_CHARS,
    JsonSchemaGrammar,
    gbnf_literal,
    react_grammar,
)
from miniagent.protocol.react_parser import parse_react
from miniagent.tools.builtin import builtin_tools

# -- a minimal GBNF matcher for the constructs the generator emits --------------------

Node = tuple[Any, ...]
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "]": "]", "[": "[", "-": "-"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def char(self) -> str:
        c = self.text[self.pos]
        self.pos += 1
        if c != "\\":
            return c
        e = self.text[self.pos]
        self.pos += 1
        if e in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[e]
            value = int(self.text[self.pos : self.pos + width], 16)
            self.pos += width
            return chr(value)
        return _ESCAPES[e]

    def alternatives(self) -> Node:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return ("alt", options)

    def sequence(self) -> Node:
        items: list[Node] = []
        self.skip()
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified(self.item()))
            self.skip()
        return ("seq", items)

    def item(self) -> Node:
        c = self.peek()
        if c == '"':
            self.pos += 1
            out = []
            while self.peek() != '"':
                out.append(self.char())
            self.pos += 1
            return ("lit", "".join(out))
        if c == "[":
            return self.char_class()
        if c == "(":
            self.pos += 1
            node = self.alternatives()
            assert self.peek() == ")"
            self.pos += 1
            return node
        m = re.compile(r"[a-zA-Z0-9-]+").match(self.text, self.pos)
        assert m, f"bad grammar at {self.text[self.pos :]!r}"
        self.pos = m.end()
        return ("ref", m.group())

    def char_class(self) -> Node:
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges = []
        while self.peek() != "]":
            low = self.char()
            high = low
            if self.peek() == "-" and self.text[self.pos + 1] != "]":
                self.pos += 1
                high = self.char()
            ranges.append((low, high))
        self.pos += 1
        return ("cls", negated, ranges)

    def quantified(self, node: Node) -> Node:
        c = self.peek()
        if c in "?*+" and c:
            self.pos += 1
            return ("rep", node, 0 if c != "+" else 1, 1 if c == "?" else None)
        if c == "{":
            end = self.text.index("}", self.pos)
            low, _, high = self.text[self.pos + 1 : end].partition(",")
            self.pos = end + 1
            return ("rep", node, int(low), int(high) if high else None)
        return node


def parse_gbnf(text: str) -> dict[str, Node]:
    rules: dict[str, Node] = {}
    for line in text.strip().splitlines():
        name, _, body = line.partition(" ::= ")
        parser = _Parser(body)
        rules[name] = parser.alternatives()
        assert parser.pos == len(body), f"unparsed rest in {line!r}"
    return rules


def _match(rules: dict[str, Node], node: Node, s: str, i: int) -> Iterator[int]:
    kind = node[0]
    if kind == "lit":
        if s.startswith(node[1], i):
            yield i + len(node[1])
    elif kind == "cls":
        if i < len(s):
            inside = any(lo <= s[i] <= hi for lo, hi in node[2])
            if inside != node[1]:
                yield i + 1
    elif kind == "ref":
        yield from _match(rules, rules[node[1]], s, i)
    elif kind == "alt":
        for option in node[1]:
            yield from _match(rules, option, s, i)
    elif kind == "seq":
        yield from _seq(rules, node[1], s, i)
    else:
        yield from _rep(rules, node[1], node[2], node[3], s, i, 0)


def _seq(rules: dict[str, Node], items: list[Node], s: str, i: int) -> Iterator[int]:
    if not items:
        yield i
        return
    for j in _match(rules, items[0], s, i):
        yield from _seq(rules, items[1:], s, j)


def _rep(
    rules: dict[str, Node], node: Node, low: int, high: int | None, s: str, i: int, n: int
) -> Iterator[int]:
    if high is None or n < high:
        for j in _match(rules, node, s, i):
            if j > i:
                yield from _rep(rules, node, low, high, s, j, n + 1)
    if n >= low:
        yield i


def accepts(grammar: str, text: str, start: str = "root") -> bool:
    rules = parse_gbnf(grammar)
    return any(end == len(text) for end in _match(rules, ("ref", start), text, 0))


def schema_accepts(schema: dict[str, Any], value_text: str) -> bool:
    builder = JsonSchemaGrammar()
    name = builder.rule_for(schema, "value", schema.get("$defs"))
    grammar = builder.render_rules() + f"\nroot ::= {name}"
    return accepts(grammar, value_text)


# -- tools used below -----------------------------------------------------------------


class Unit(str, enum.Enum):
    c = "celsius"
    f = "fahrenheit"


class Point(BaseModel):
    x: int
    y: float = 0.0


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


@dataclass
class Box:
    label: str


@tool
def weather(city: str, unit: Unit = Unit.c, days: Optional[int] = None) -> str:  # noqa: UP045
    """Weather forecast.

    Args:
        city: the city
        unit: the unit
        days: how many days
    """
    return city


@tool
def plot(points: list[Point], mode: Literal["line", "dots"], tags: dict[str, int]) -> str:
    """Plot points."""
    return ""


@tool
def walk(tree: TreeNode, flag: bool = False, box: Box | None = None) -> str:
    """Walk a tree."""
    return ""


@tool(name="no-args")
def no_args() -> str:
    """Nothing to pass."""
    return ""


ALL_TOOLS = [weather, plot, walk, no_args, *builtin_tools(".")]


def action(name: str, args: Any, thought: str = "I should use a tool") -> str:
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f"Thought: {thought}\nAction: {name}\nAction Input: {raw}"


# -- structure ------------------------------------------------------------------------


def test_every_rule_is_defined_once_and_names_are_valid() -> None:
    grammar = react_grammar(ALL_TOOLS)
    names = [line.partition(" ::= ")[0] for line in grammar.strip().splitlines()]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9-]+", n) for n in names)
    rules = parse_gbnf(grammar)
    referenced: set[str] = set()

    def walk_node(node: Node) -> None:
        if node[0] == "ref":
            referenced.add(node[1])
        elif node[0] in ("alt", "seq"):
            for child in node[1]:
                walk_node(child)
        elif node[0] == "rep":
            walk_node(node[1])

    for node in rules.values():
        walk_node(node)
    assert referenced <= set(rules)
    assert names[0] == "root"


def test_tool_names_are_literal_alternatives() -> None:
    grammar = react_grammar(ALL_TOOLS)
    for t in ALL_TOOLS:
        assert gbnf_literal(t.name + "\nAction Input: ") in grammar


def test_gbnf_literal_escapes() -> None:
    assert gbnf_literal('a"b\\c\nd\te') == '"a\\"b\\\\c\\nd\\te"'
    assert accepts("root ::= " + gbnf_literal('a"b\\c\nd\te'), 'a"b\\c\nd\te')


# -- what the grammar accepts ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        action("weather", {"city": "Paris"}),
        action("weather", {"city": "Paris", "unit": "fahrenheit", "days": 3}),
        action("weather", {"city": "Paris", "days": None}),
        action("weather", '{ "city": "Pa\\"ris\\u00e9" }'),
        action(
            "plot",
            {"points": [{"x": 1}, {"x": -2, "y": 1.5e3}], "mode": "dots", "tags": {"a": 1, "b": 2}},
        ),
        action("plot", {"points": [], "mode": "line", "tags": {}}),
        action("walk", {"tree": {"value": 1, "children": [{"value": 2, "children": []}]}}),
        action("walk", {"tree": {"value": 1}, "flag": True, "box": {"label": "x"}}),
        action("no-args", {}),
        action("calculator", {"expression": "2+3*4"}),
        action("list_files", {}),
        action("read_file", {"file_path": "a.txt", "max_lines": 5}),
        "Thought: I know it\nFinal Answer: 42",
        "Thought: done\nFinal Answer: line one\nline two: with Observation: text",
    ],
)
def test_accepts_well_formed_turns(text: str) -> None:
    assert accepts(react_grammar(ALL_TOOLS), text)
    assert parse_react(text).kind in ("action", "final")


@pytest.mark.parametrize(
    "text",
    [
        action("unknown_tool", {"city": "Paris"}),
        action("weather", {}),  # missing required city
        action("weather", {"city": 3}),  # wrong type
        action("weather", {"city": "Paris", "unit": "kelvin"}),  # not in the enum
        action("weather", {"days": 3, "city": "Paris"}),  # required ones come first
        action("weather", {"city": "Paris", "extra": 1}),  # no extra properties
        action("weather", '{"city": "Pa\nris"}'),  # raw newline in a string
        action("weather", '{"city":  "Paris"}'),  # at most one space
        action("plot", {"points": [{"y": 1.0}], "mode": "line", "tags": {}}),
        action("plot", {"points": [], "mode": "line", "tags": {"a": "x"}}),
        action("calculator", {"expression": "1"}) + "\nObservation: 1",
        action("calculator", {"expression": "1"}, thought="use Action: calculator"),
        "Final Answer: no thought",
        "Thought: nothing else",
        "Thought: x\nFinal Answer: ",
        "Thought: " + "x" * (THOUGHT_MAX_CHARS + 1) + "\nFinal Answer: y",
    ],
)
def test_rejects_malformed_turns(text: str) -> None:
    assert not accepts(react_grammar(ALL_TOOLS), text)


def test_no_tools_admits_only_a_final_answer() -> None:
    grammar = react_grammar([])
    assert accepts(grammar, "Thought: easy\nFinal Answer: hi")
    assert not accepts(grammar, action("calculator", {"expression": "1"}))


def test_optional_properties_any_subset_in_order() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "c": {"type": "integer"},
        },
        "required": [],
    }
    for text in ["{}", '{"a":1}', '{"b":2}', '{"c":3}', '{"a":1,"c":3}', '{"a":1, "b":2, "c":3}']:
        assert schema_accepts(schema, text), text
    for text in ['{"b":2,"a":1}', '{,"a":1}', '{"a":1,}', '{"a":1,,"b":2}']:
        assert not schema_accepts(schema, text), text


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "integer"}, ["0", "-12", "123456"], ["01", "1.5", "+1", '"1"']),
        ({"type": "number"}, ["0", "-1.25", "3e5", "2.5E-3"], ["1.", ".5", "NaN"]),
        ({"type": "boolean"}, ["true", "false"], ["True", "1"]),
        ({"type": "null"}, ["null"], ["None"]),
        ({"const": "x"}, ['"x"'], ['"y"']),
        ({"enum": [1, "a", None]}, ["1", '"a"', "null"], ["2"]),
        ({"type": ["string", "null"]}, ['"s"', "null"], ["1"]),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, ["1", "null"], ['"1"']),
        ({"type": "array", "items": {"type": "integer"}}, ["[]", "[1, 2]", "[1,2]"], ["[1,]"]),
        ({}, ['{"a": [1, {"b": null}]}', '"s"', "true", "-1.5"], ["{a:1}", "[1,]"]),
        ({"type": "object"}, ['{"k": [true]}', "{}"], ["[]"]),
        ({"type": "object", "additionalProperties": False}, ["{}"], ['{"a":1}']),
        ({"not": {"type": "string"}}, ["1", '"s"'], ["nope"]),  # unknown: any JSON value
    ],
)
def test_schema_subset(schema: dict[str, Any], good: list[str], bad: list[str]) -> None:
    for text in good:
        assert schema_accepts(schema, text), text
    for text in bad:
        assert not schema_accepts(schema, text), text


def test_unknown_ref_falls_back_to_any_json_value() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}, "required": ["x"]}
    assert schema_accepts(schema, '{"x": {"any": [1]}}')


@settings(max_examples=40, deadline=None)
@given(
    city=st.text(max_size=20),
    days=st.one_of(st.none(), st.integers(-(10**6), 10**6)),
    unit=st.sampled_from(["celsius", "fahrenheit"]),
)
def test_valid_arguments_always_accepted(city: str, days: int | None, unit: str) -> None:
    text = action("weather", {"city": city, "unit": unit, "days": days})
    assert accepts(react_grammar([weather]), text)
    parsed = parse_react(text)
    assert parsed.kind == "action"
    assert parsed.tool_calls[0].arguments == {"city": city, "unit": unit, "days": days}


def test_llama_cpp_accepts_the_grammar() -> None:
    """llama.cpp parses grammars when it builds the sampler: a NULL sampler means rejected."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from miniagent.errors import ConfigError
    from miniagent.models.local import resolve_model_path

    try:
        path = resolve_model_path()
    except ConfigError as exc:
        pytest.skip(str(exc))
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)

    def accepted(text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, text.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    assert not accepted("root ::= undefined-rule")  # the check can fail
    for tools in (ALL_TOOLS, [], [weather]):
        assert accepted(react_grammar(tools))


@dataclass
class SchemaTool:
    name: str
    parameters: dict[str, Any]
    description: str = ""


def _node_tool(name: str, node: dict[str, Any]) -> SchemaTool:
    return SchemaTool(name, {
        "type": "object", "properties": {"x": {"$ref": "#/$defs/Node"}}, "required": ["x"],
        "additionalProperties": False, "$defs": {"Node": node},
    })


def test_same_named_definitions_of_two_tools_stay_apart() -> None:
    tree = _node_tool("a", {"type": "object", "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["name"]})
    chain = _node_tool("b", {"type": "object", "properties": {
        "value": {"type": "integer"},
        "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}}, "required": ["value"]})
    rules = dict(line.split(" ::= ", 1)
                 for line in react_grammar([tree, chain]).strip().splitlines())
    a_defs = [body for name, body in rules.items() if name.startswith("a-args-def")]
    b_defs = [body for name, body in rules.items() if name.startswith("b-args-def")]
    assert a_defs and b_defs
    assert not any("value" in body for body in a_defs)
    assert any("value" in body for body in b_defs) and any("name" in body for body in a_defs)

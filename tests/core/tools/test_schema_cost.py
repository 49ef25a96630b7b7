"""Schemas whose cost is bounded: what froze the event loop for minutes is refused when the tool
is defined, in milliseconds, and every schema that is accepted is validated, coerced and turned
into a grammar in bounded time (pytest-timeout bounds each test; no timing assert)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miniagent import Tool, ToolCall
from miniagent.core.errors import ToolDefinitionError
from miniagent.core.protocol.grammar import react_grammar
from miniagent.core.tools.schema_cost import MAX_EXPANDED_NODES
from miniagent.core.tools.toolbox import ToolRegistry
from tool_calls import execute, toolbox_of


def doubling(levels: int, *, sibling_type: bool = False) -> dict[str, Any]:
    """Each definition refers twice to the next one: 2**levels nodes once expanded."""
    defs: dict[str, Any] = {f"D{levels}": {"type": "string"}}
    for i in range(levels - 1, -1, -1):
        node: dict[str, Any] = {"allOf": [{"$ref": f"#/$defs/D{i + 1}"}] * 2}
        if sibling_type:
            node = {"$ref": f"#/$defs/D{i + 1}", "type": "string", "allOf": node["allOf"]}
        defs[f"D{i}"] = node
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}},
            "required": ["x"], "$defs": defs}


def nested_items(depth: int) -> dict[str, Any]:
    """``{"type": "array", "items": {...}}`` nested ``depth`` deep (built without recursion)."""
    top: dict[str, Any] = {"type": "array"}
    node = top
    for _ in range(depth):
        node["items"] = {"type": "array"}
        node = node["items"]
    return top


def define(schema: dict[str, Any]) -> Tool:
    return Tool.from_schema(name="t", description="A tool.", parameters=schema,
                            fn=lambda args: "ran")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("schema", [
    doubling(19),  # 1.7 KB: validation doubled at each of 19 levels
    doubling(24, sibling_type=True),  # $ref beside a type: the grammar builder inlined it
    {"type": "object", "properties": {"x": {"allOf": [{"$ref": "#/$defs/A"}] * 6}},
     "$defs": {name: {"allOf": [{"$ref": f"#/$defs/{after}"}] * 6}
               for name, after in zip("ABCDE", "BCDEF")} | {"F": {"type": "integer"}}},
    {"type": "object", "properties": {"x": {"enum": list(range(1_000_000))}}},
    {"type": "object", "properties": {"x": nested_items(5_000)}},
], ids=["doubling-19", "ref-beside-type-24", "allof-of-6", "enum-1e6", "deep-5000"])
def test_a_schema_that_could_cost_without_bound_is_refused_at_once(
        schema: dict[str, Any]) -> None:
    with pytest.raises(ToolDefinitionError, match="Tool 't': its schema"):
        define(schema)


def test_an_mcp_server_with_such_a_schema_keeps_its_other_tools(
        caplog: pytest.LogCaptureFixture) -> None:
    from types import SimpleNamespace

    from miniagent.mcp import MCPServer

    server = MCPServer.stdio("unused")
    listed = [SimpleNamespace(name="bomb", description="x", title=None, annotations=None,
                              input_schema=doubling(19)),
              SimpleNamespace(name="fine", description="y", title=None, annotations=None,
                              input_schema={"type": "object", "properties": {}})]
    built = server._build_tools(listed)
    assert [t.name for t in built] == ["fine"]
    assert "'bomb' left out" in caplog.text and "expands" in caplog.text


def test_a_default_that_does_not_fit_its_property_is_not_filled_in() -> None:
    tool = define({"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "default": None},
        "days": {"type": "integer", "default": 3}}, "required": ["city"]})
    observation = asyncio.run(execute(ToolRegistry([tool]),
        ToolCall(id="c", name="t", arguments={"city": "Oslo"})))
    assert not observation.is_error, observation.output  # a valid call stays valid


# -- generated hostile schemas: accepted ones cost a bounded time, refused ones are refused --

names = st.sampled_from(["A", "B", "C", "D", "E"])


@st.composite
def hostile(draw: Any) -> dict[str, Any]:
    def node(depth: int) -> Any:
        kind = draw(st.sampled_from(["ref", "allOf", "anyOf", "enum", "type", "object"]
                                    if depth < 4 else ["ref", "type"]))
        if kind == "ref":
            return {"$ref": f"#/$defs/{draw(names)}",
                    **({"type": "string"} if draw(st.booleans()) else {})}
        if kind in ("allOf", "anyOf"):
            return {kind: [node(depth + 1) for _ in range(draw(st.integers(1, 6)))]}
        if kind == "enum":
            return {"enum": list(range(draw(st.sampled_from([1, 10, 1_000, 50_000]))))}
        if kind == "object":
            return {"type": "object", "properties": {
                f"p{i}": node(depth + 1) for i in range(draw(st.integers(0, 4)))}}
        return {"type": draw(st.sampled_from(["string", "integer", "array", "object"]))}

    defs = {name: node(1) for name in ["A", "B", "C", "D", "E"]}
    return {"type": "object", "properties": {"x": node(1)}, "$defs": defs}


@pytest.mark.timeout(300)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=hostile(), value=st.one_of(st.integers(), st.text(max_size=5), st.none()))
def test_generated_schemas_are_refused_or_cheap_to_use(schema: dict[str, Any],
                                                       value: Any) -> None:
    try:
        tool = define(schema)
    except ToolDefinitionError as exc:
        assert "Tool 't'" in str(exc)
        return
    toolbox = toolbox_of(ToolRegistry([tool]))
    asyncio.run(toolbox.execute(ToolCall(id="c", name="t", arguments={"x": value})))
    react_grammar([tool], max_tokens=256)
    assert MAX_EXPANDED_NODES > 0

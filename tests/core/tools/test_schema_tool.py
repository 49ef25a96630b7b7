"""Tool.from_schema: tools defined by a JSON Schema, run through the registry and the agent."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miniagent import Agent, ScriptedModel, Tool, ToolDefinitionError, ToolError, ToolRegistry, tool
from miniagent.core.types import Observation, ToolCall
from tool_calls import execute, toolbox_of

DIRECTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "from_": {"type": "string", "description": "where to start"},
        "to": {"type": "string", "default": "home"},
        "stops": {"type": "integer", "minimum": 0, "default": 0},
        "mode": {"enum": ["walk", "bike", "car"], "default": "walk"},
        "avoid_tolls": {"type": "boolean"},
        "via": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"},
                               "label": {"type": "string", "default": ""}},
                "required": ["lat", "lon"],
                "additionalProperties": False,
            },
        },
        "options": {
            "type": "object",
            "properties": {"speed_kmh": {"type": "number"}, "night": {"type": "boolean",
                                                                      "default": False}},
        },
    },
    "required": ["from_"],
    "additionalProperties": False,
}

RECEIVED: list[dict[str, Any]] = []


def route(args: dict[str, Any]) -> str:
    RECEIVED.append(args)
    return f"{args['from_']} -> {args['to']} by {args['mode']}"


directions = Tool.from_schema(
    name="get_directions", description="Directions between two places.",
    parameters=DIRECTIONS_SCHEMA, fn=route,
)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RECEIVED.clear()


def call(arguments: Any = None, name: str = "get_directions", **extra: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments={} if arguments is None else arguments,
                    **extra)


async def run(target: Tool, arguments: Any = None, **extra: Any) -> Observation:
    return await execute(ToolRegistry([target]), call(arguments, name=target.name, **extra))


def schema_tool(parameters: dict[str, Any], fn: Any = None, **options: Any) -> Tool:
    return Tool.from_schema(name=options.pop("name", "t"), description="A test tool.",
                            parameters=parameters, fn=fn or (lambda args: args), **options)


def props(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# -- definition ------------------------------------------------------------------------


def test_metadata_and_wire_format() -> None:
    assert (directions.name, directions.description) == (
        "get_directions", "Directions between two places.")
    assert directions.parameters == DIRECTIONS_SCHEMA
    assert directions.parameters is not DIRECTIONS_SCHEMA  # a copy: later edits do not leak in
    assert directions.openai_schema() == {"type": "function", "function": {
        "name": "get_directions", "description": "Directions between two places.",
        "parameters": DIRECTIONS_SCHEMA}}
    assert directions.fn is route and not directions.is_async and directions.spec is None
    assert (directions.timeout, directions.idempotent, directions.requires_approval) == (
        None, False, False)


def test_properties_without_type_gets_type_object() -> None:
    t = schema_tool({"properties": {"q": {"type": "string"}}})
    assert t.parameters == {"type": "object", "properties": {"q": {"type": "string"}}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "has space"}, "Invalid tool name"),
        ({"name": "dotted.name"}, "Invalid tool name"),
        ({"name": "x" * 65}, "Invalid tool name"),
        ({"name": ""}, "Invalid tool name"),
        ({"name": "ok\n"}, "Invalid tool name"),
        ({"parameters": {"type": "string"}}, "must describe a JSON object"),
        ({"parameters": {"description": "no type, no properties"}}, "must describe a JSON object"),
        ({"parameters": ["not", "a", "dict"]}, "must be a JSON Schema object"),
        ({"parameters": {"type": "object", "properties": {"n": {"type": "integr"}}}},
         "not a valid JSON Schema: at properties/n/type"),
        ({"parameters": {"type": "object", "required": "n"}}, "not a valid JSON Schema"),
        ({"parameters": {"type": "object", "properties": {"s": {"pattern": "("}}}},
         "not a 'regex'"),
        ({"parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}},
         "cannot resolve \"$ref\": '#/$defs/Missing'"),
        ({"parameters": {"type": "object", "properties": {"a": {"$ref": "https://x.test/s"}}}},
         "cannot resolve"),
        ({"fn": "not callable"}, "not callable"),
        ({"description": None}, "description must be a string"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": -1.0}, "timeout must be a positive number"),
    ],
)
def test_invalid_definitions_are_refused(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"name": "t", "description": "d",
                                 "parameters": props(q={"type": "string"}), "fn": lambda a: a}
    arguments.update(options)
    with pytest.raises(ToolDefinitionError, match=re.escape(message)):
        Tool.from_schema(**arguments)


def test_schema_with_its_own_draft_is_checked_by_that_draft() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "definitions": {"N": {"type": "integer"}},
              "properties": {"n": {"$ref": "#/definitions/N"}, "pair": {
                  "type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}}
    t = schema_tool(draft7)
    assert t.name == "t"


async def test_draft7_tuple_items_and_definitions_validate_and_coerce() -> None:
    t = schema_tool({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                     "definitions": {"N": {"type": "integer"}},
                     "properties": {"n": {"$ref": "#/definitions/N"}, "pair": {
                         "type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}})
    ok = await run(t, {"n": "4", "pair": [5, "6"]})
    assert (ok.is_error, json.loads(ok.output)) == (False, {"n": 4, "pair": ["5", 6]})
    bad = await run(t, {"pair": ["a", "b"]})
    assert bad.is_error and "- pair.1: 'b' is not of type 'integer' (got 'b')" in bad.output


def test_registry_accepts_schema_tools_next_to_function_tools() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    registry = ToolRegistry([add, directions])
    assert registry.names == ["add", "get_directions"]
    assert registry.get("get_directions") is directions and list(registry)[1] is directions
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(schema_tool(props(), name="get_directions"))


def test_tool_options_rewrap_a_schema_tool() -> None:
    slow = tool(directions, timeout=3.0, idempotent=True)
    assert slow is not directions and slow.spec is None
    assert (slow.name, slow.timeout, slow.idempotent, slow.parameters) == (
        "get_directions", 3.0, True, DIRECTIONS_SCHEMA)
    assert tool(directions) is directions


def test_import_miniagent_does_not_load_jsonschema() -> None:
    code = "import sys, miniagent; print(sorted(m for m in ('jsonschema', 'referencing') " \
           "if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# -- running ---------------------------------------------------------------------------


async def test_execute_returns_the_function_result_with_defaults_filled() -> None:
    observation = await run(directions, {"from_": "Paris"})
    assert (observation.is_error, observation.output) == (False, "Paris -> home by walk")
    assert observation.tool_name == "get_directions" and observation.call_id == "c1"
    assert RECEIVED == [{"from_": "Paris", "to": "home", "stops": 0, "mode": "walk"}]


async def test_nested_defaults_are_filled_in_objects_and_array_items() -> None:
    await run(directions, {"from_": "A", "via": [{"lat": 1, "lon": 2}], "options": {}})
    assert RECEIVED[0]["via"] == [{"lat": 1, "lon": 2, "label": ""}]
    assert RECEIVED[0]["options"] == {"night": False}


async def test_defaults_are_copies() -> None:
    t = schema_tool(props(tags={"type": "array", "default": []}),
                    fn=lambda args: args["tags"].append("x") or len(args["tags"]))
    assert (await run(t, {})).output == "1"
    assert (await run(t, {})).output == "1"
    assert t.parameters["properties"]["tags"]["default"] == []


async def test_the_call_record_is_not_changed_by_coercion_or_by_the_function() -> None:
    arguments = {"from_": 5, "via": [{"lat": "1", "lon": 2}]}

    def spoil(args: dict[str, Any]) -> str:
        args["via"][0]["lat"] = "spoiled"
        return "ok"

    t = Tool.from_schema(name="spoil", description="", parameters=DIRECTIONS_SCHEMA, fn=spoil)
    the_call = call(arguments, name="spoil")
    assert not (await execute(ToolRegistry([t]), the_call)).is_error
    assert the_call.arguments == {"from_": 5, "via": [{"lat": "1", "lon": 2}]}


@pytest.mark.parametrize(
    ("schema", "given", "received"),
    [
        ({"type": "integer"}, "20", 20),
        ({"type": "integer"}, " -7 ", -7),
        ({"type": "integer"}, "20.0", 20),
        ({"type": "integer"}, 20.0, 20),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "number"}, "1e3", 1000.0),
        ({"type": "number"}, "20", 20),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "False", False),
        ({"type": "boolean"}, "yes", True),
        ({"type": "boolean"}, 0, False),
        ({"type": "string"}, 20, "20"),
        ({"type": "string"}, 2.5, "2.5"),
        ({"type": ["integer", "null"]}, "3", 3),
        ({"type": ["integer", "string"]}, "3", "3"),  # already valid: kept
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "3", 3),
        ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "true", True),
        ({"oneOf": [{"type": "number"}, {"type": "array"}]}, "4.5", 4.5),
        ({"enum": [1, 2, 3]}, "2", 2),
        ({"enum": ["1", "2"]}, 2, "2"),
        ({"type": "integer", "enum": [10, 20]}, "20", 20),
        ({"const": True}, "true", True),
        ({"$ref": "#/$defs/Count"}, "5", 5),
        ({"allOf": [{"type": "integer"}, {"minimum": 1}]}, "5", 5),
        ({"type": "array", "items": {"type": "integer"}}, ["1", 2, "3"], [1, 2, 3]),
        ({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
         [1, "2", "3"], ["1", 2, 3]),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": "4"}, {"n": 4}),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": "1"}, {"a": 1}),
        ({"type": "object", "patternProperties": {"^n_": {"type": "integer"}}}, {"n_x": "2"},
         {"n_x": 2}),
        ({"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}, {"x": "1"}, {"x": 1}),
    ],
)
async def test_lax_coercion_guided_by_the_schema(schema: dict[str, Any], given: Any,
                                                 received: Any) -> None:
    parameters = {**props(value=schema), "$defs": {
        "Count": {"type": "integer"},
        "Point": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    observation = await run(schema_tool(parameters), {"value": given})
    assert not observation.is_error, observation.output
    value = json.loads(observation.output)["value"]
    assert value == received and type(value) is type(received)


@pytest.mark.parametrize(
    ("schema", "given"),
    [
        ({"type": "integer"}, 2.5),  # never rounded
        ({"type": "integer"}, "2.5"),
        ({"type": "integer"}, True),  # JSON keeps booleans apart from numbers
        ({"type": "integer"}, "1e3"),
        ({"type": "number"}, "nan"),
        ({"type": "number"}, "Infinity"),
        ({"type": "number"}, True),
        ({"type": "boolean"}, "maybe"),
        ({"type": "boolean"}, 2),
        ({"type": "string"}, True),
        ({"type": "string"}, None),
        ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "1"),  # ambiguous: 1 or true
        ({"enum": [1, True]}, "1"),  # ambiguous too
        ({"type": "array", "items": {"type": "integer"}}, "[1, 2]"),  # no JSON-in-a-string
    ],
)
async def test_coercion_never_changes_meaning(schema: dict[str, Any], given: Any) -> None:
    observation = await run(schema_tool(props(value=schema)), {"value": given})
    assert observation.is_error, observation.output
    assert f"(got {given!r})" in observation.output


async def test_coercion_parity_with_function_tools() -> None:
    """The same sloppy inputs reach both kinds of tool as the same values."""

    @tool
    def typed(n: int, x: float, flag: bool, text: str) -> dict[str, Any]:
        """Typed."""
        return {"n": n, "x": x, "flag": flag, "text": text}

    by_schema = schema_tool(props(n={"type": "integer"}, x={"type": "number"},
                                  flag={"type": "boolean"}, text={"type": "string"}))
    for sent in [{"n": "20", "x": "2.5", "flag": "true", "text": 7},
                 {"n": 3.0, "x": "1e3", "flag": "off", "text": 2.5},
                 {"n": "-4", "x": "7", "flag": 1, "text": "s"}]:
        function_out = await execute(ToolRegistry([typed]), call(sent, name="typed"))
        schema_out = await run(by_schema, sent)
        assert not function_out.is_error and not schema_out.is_error
        assert json.loads(function_out.output) == json.loads(schema_out.output), sent


async def test_async_function() -> None:
    async def fetch(args: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"got": args["q"]}

    t = schema_tool(props(q={"type": "string"}), fn=fetch)
    assert t.is_async
    observation = await run(t, {"q": 42})
    assert (observation.is_error, observation.output) == (False, '{"got": "42"}')


async def test_sync_function_runs_in_a_worker_thread() -> None:
    threads: list[threading.Thread] = []
    t = schema_tool(props(), fn=lambda args: threads.append(threading.current_thread()))
    observation = await run(t, {})
    assert observation.output == "(no output)"
    assert threads and threads[0] is not threading.main_thread()


async def test_tool_error_message_is_verbatim() -> None:
    def refuse(args: dict[str, Any]) -> str:
        raise ToolError(f"No route to {args['to']}; try a city name.")

    observation = await run(schema_tool(props(to={"type": "string"}), fn=refuse), {"to": "Mars"})
    assert observation.is_error
    assert observation.output == "No route to Mars; try a city name."


async def test_other_exceptions_become_error_observations() -> None:
    def broken(args: dict[str, Any]) -> str:
        raise KeyError("missing")

    observation = await run(schema_tool(props(), fn=broken, name="broken"), {})
    assert observation.is_error
    assert observation.output == "Error executing tool 'broken': KeyError: 'missing'"


async def test_timeout() -> None:
    async def hang(args: dict[str, Any]) -> str:
        await asyncio.sleep(10)
        return "late"

    t = schema_tool(props(), fn=hang, name="hang", timeout=0.05)
    observation = await run(t, {})
    assert observation.is_error
    assert observation.output == "Tool 'hang' timed out after 0.05 s."


async def test_registry_default_timeout_applies_to_sync_schema_tools() -> None:
    release = threading.Event()
    t = schema_tool(props(), fn=lambda args: release.wait(5), name="block")
    registry = ToolRegistry([t], default_timeout=0.05)
    observation = await execute(registry, call({}, name="block"))
    release.set()
    assert observation.is_error and "timed out after 0.05 s" in observation.output


# -- what the model is told ----------------------------------------------------------------


def schema_text() -> str:
    return "Schema: " + json.dumps(DIRECTIONS_SCHEMA, ensure_ascii=False)


async def test_missing_and_unknown_names_are_listed_with_the_valid_names() -> None:
    observation = await run(directions, {"start": "A", "speed": 3})
    assert observation.is_error and RECEIVED == []
    assert observation.output == (
        "Invalid arguments for tool 'get_directions'. Missing required argument(s): from_. "
        "Unknown argument(s): start, speed. Valid arguments: from_, to, stops, mode, "
        f"avoid_tolls, via, options. {schema_text()}"
    )


async def test_type_error_names_the_path_and_the_value() -> None:
    observation = await run(directions, {"from_": "A", "stops": "many"})
    assert observation.output == (
        "Invalid arguments for tool 'get_directions':\n"
        "- stops: 'many' is not of type 'integer' (got 'many')\n" + schema_text()
    )


async def test_enum_violation() -> None:
    observation = await run(directions, {"from_": "A", "mode": "plane"})
    assert observation.is_error
    assert "- mode: 'plane' is not one of ['walk', 'bike', 'car'] (got 'plane')" in (
        observation.output)
    assert observation.output.endswith(schema_text())


async def test_nested_errors_carry_their_path() -> None:
    observation = await run(directions, {"from_": "A", "via": [
        {"lat": 1, "lon": 2}, {"lat": "north", "lon": 2}, {"lon": 3, "alt": 9}],
        "options": {"speed_kmh": "fast"}})
    lines = observation.output.splitlines()
    assert lines[0] == "Invalid arguments for tool 'get_directions':"
    assert "- via.1.lat: 'north' is not of type 'number' (got 'north')" in lines
    assert "- via.2: 'lat' is a required property" in lines
    assert any(line.startswith("- via.2: Additional properties are not allowed ('alt' was "
                               "unexpected)") for line in lines)
    assert "- options.speed_kmh: 'fast' is not of type 'number' (got 'fast')" in lines
    assert lines[-1] == schema_text()


async def test_at_most_five_errors_are_listed() -> None:
    t = schema_tool({"type": "object", "additionalProperties": {"type": "integer"}})
    observation = await run(t, {f"k{i}": "x" for i in range(8)})
    lines = observation.output.splitlines()
    assert len([line for line in lines if line.startswith("- k")]) == 5
    assert "- ... and 3 more" in lines


@pytest.mark.parametrize(
    ("extra", "sent", "error"),
    [
        (False, {"a": 1, "b": 2}, "Unknown argument(s): b."),
        (True, {"a": 1, "b": [2]}, None),
        ({"type": "string"}, {"a": 1, "b": "two"}, None),
        ({"type": "string"}, {"a": 1, "b": 2}, None),  # a number becomes its text
        ({"type": "string"}, {"a": 1, "b": [2]}, "- b: [2] is not of type 'string' (got [2])"),
    ],
)
async def test_additional_properties(extra: Any, sent: dict[str, Any], error: str | None) -> None:
    t = schema_tool({**props(a={"type": "integer"}), "additionalProperties": extra})
    observation = await run(t, sent)
    if error is None:
        assert not observation.is_error, observation.output
    else:
        assert observation.is_error and error in observation.output


async def test_absent_additional_properties_allows_extra_names() -> None:
    observation = await run(schema_tool(props(a={"type": "integer"})), {"a": "1", "zz": True})
    assert json.loads(observation.output) == {"a": 1, "zz": True}


async def test_pattern_properties_are_known_names_even_when_closed() -> None:
    t = schema_tool({"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
                     "additionalProperties": False})
    assert json.loads((await run(t, {"x-a": "1"})).output) == {"x-a": 1}
    assert "Unknown argument(s): y." in (await run(t, {"y": 1})).output


async def test_not_valid_json_shows_the_raw_input_and_the_schema() -> None:
    observation = await run(directions, {}, raw_arguments='{"from_": "A"',
                            arguments_error="Expecting ',' delimiter")
    assert observation.output.startswith(
        "The arguments for tool 'get_directions' are not valid JSON (Expecting ',' delimiter). "
        "Raw input: '{\"from_\": \"A\"'. Send a JSON object matching this schema: {")


async def test_bare_value_goes_to_the_single_required_property() -> None:
    observation = await run(directions, {}, raw_arguments="Paris")
    assert (observation.is_error, observation.output) == (False, "Paris -> home by walk")
    count = schema_tool({**props(n={"type": "integer"}), "required": ["n"]})
    assert json.loads((await run(count, {}, raw_arguments="20")).output) == {"n": 20}


async def test_a_bare_value_without_a_single_parameter_asks_for_an_object() -> None:
    t = schema_tool(props(a={"type": "integer"}, b={"type": "string"}))
    observation = await run(t, {}, raw_arguments="3")
    assert observation.is_error
    assert observation.output.startswith(
        "Tool 't' expects a JSON object with the fields: a, b. Got '3'. Schema: {")


async def test_a_list_instead_of_an_object() -> None:
    observation = await run(directions, [1, 2])
    assert observation.is_error
    assert "expects a JSON object with the fields: from_ (required), to" in observation.output


async def test_required_property_with_a_default_may_be_left_out() -> None:
    t = schema_tool({**props(unit={"type": "string", "default": "c"}), "required": ["unit"]})
    assert json.loads((await run(t, {})).output) == {"unit": "c"}


async def test_format_is_checked() -> None:
    t = schema_tool(props(day={"type": "string", "format": "date"}))
    assert not (await run(t, {"day": "2024-02-29"})).is_error
    observation = await run(t, {"day": "tomorrow"})
    assert observation.is_error and "- day: 'tomorrow' is not a 'date'" in observation.output


async def test_a_schema_that_cannot_be_checked_is_an_error_observation() -> None:
    t = schema_tool({**props(a={"$ref": "#/$defs/A"}), "$defs": {"A": {"$ref": "#/$defs/A"}}})
    observation = await run(t, {"a": 1})
    assert observation.is_error and "the schema could not be checked" in observation.output


# -- approval ----------------------------------------------------------------------------


def test_approval_predicate_sees_the_coerced_validated_arguments() -> None:
    seen: list[dict[str, Any]] = []

    def expensive(args: dict[str, Any]) -> bool:
        seen.append(args)
        return bool(args["amount"] > 100)

    pay = schema_tool({**props(amount={"type": "integer"}, currency={"default": "EUR"}),
                       "required": ["amount"]}, name="pay", requires_approval=expensive)
    registry = ToolRegistry([pay])
    assert toolbox_of(registry).needs_approval(call({"amount": "500"}, name="pay")) is True
    assert seen[-1] == {"amount": 500, "currency": "EUR"}
    assert toolbox_of(registry).needs_approval(call({"amount": "50"}, name="pay")) is False
    # never runs, so never asks
    assert toolbox_of(registry).needs_approval(call({"amount": "lots"}, name="pay")) is False
    assert toolbox_of(registry).needs_approval(call({}, name="pay", raw_arguments="700")) is True


def test_approval_always_and_never() -> None:
    always = schema_tool(props(), name="always", requires_approval=True)
    registry = ToolRegistry([always, schema_tool(props(), name="never")])
    assert toolbox_of(registry).needs_approval(call({}, name="always"))
    assert not toolbox_of(registry).needs_approval(call({}, name="never"))


def test_agent_waits_for_approval_of_a_schema_tool() -> None:
    ran: list[dict[str, Any]] = []
    wipe = schema_tool({**props(path={"type": "string"}), "required": ["path"]},
                       fn=ran.append, name="wipe", requires_approval=True)
    model = ScriptedModel(['Thought: x\nAction: wipe\nAction Input: {"path": 7}'])
    result = Agent(model=model, tools=[wipe]).run("wipe it")
    assert result.status == "awaiting_approval" and ran == []
    assert [(p.tool, p.arguments) for p in result.pending_approvals] == [("wipe", {"path": 7})]


# -- an agent run ----------------------------------------------------------------------


def test_agent_run_uses_the_schema_tool() -> None:
    model = ScriptedModel([
        'Thought: x\nAction: get_directions\nAction Input: {"from_": "A"}',
        "Thought: y\nAction: get_directions\nAction Input: {\"from_\": \"A\", \"stops\": \"x\"}",
        "Final Answer: ok",
    ])
    result = Agent(model=model, tools=[directions]).run("How do I get home?")
    assert (result.status, result.final_answer) == ("completed", "ok")
    first, second = (step.observations[0] for step in result.steps[:2])
    assert (first.is_error, first.output) == (False, "A -> home by walk")
    assert second.is_error and "- stops: 'x' is not of type 'integer'" in second.output
    assert RECEIVED == [{"from_": "A", "to": "home", "stops": 0, "mode": "walk"}]
    prompt = model.requests[0].messages[0]["content"]
    assert "get_directions" in prompt and '"from_"' in prompt
    assert model.requests[1].messages[-1] == {
        "role": "user", "content": "Observation: A -> home by walk"}


def test_agent_native_run_uses_the_schema_tool() -> None:
    model = ScriptedModel([
        {"content": None, "tool_calls": [{"id": "n1", "type": "function", "function": {
            "name": "get_directions", "arguments": '{"from_": "B", "mode": "car"}'}}]},
        {"content": "done"},
    ], tool_mode="native")
    result = Agent(model=model, tools=[directions]).run("Route?")
    assert (result.status, result.final_answer) == ("completed", "done")
    assert result.steps[0].observations[0].output == "B -> home by car"
    assert model.requests[0].tools == [directions.openai_schema()]


# -- nothing the model sends makes execute raise -------------------------------------------

FUZZ_TOOLS = [
    directions,
    schema_tool({"type": "object", "properties": {
        "choice": {"anyOf": [{"type": "integer"}, {"type": "boolean"}, {"$ref": "#/$defs/P"}]},
        "list": {"type": "array", "prefixItems": [{"type": "number"}],
                 "items": {"enum": ["a", 1, None]}},
        "map": {"type": "object", "additionalProperties": {"$ref": "#/$defs/P"}},
    }, "$defs": {"P": {"type": "object", "properties": {
        "x": {"type": ["integer", "null"], "default": None},
        "next": {"$ref": "#/$defs/P"}}}}}, name="fuzzy"),
    schema_tool({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "string"}},
                 "additionalProperties": False, "minProperties": 1}, name="pattern"),
]
FUZZ_REGISTRY = ToolRegistry(FUZZ_TOOLS)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=8) | st.sampled_from(["20", "2.5", "true", "off", "1e999", "-0"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["from_", "to", "via", "lat", "x", "next", "choice",
                                       "list", "map", "mode", "a", "A"]) | st.text(max_size=4),
                      children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from([t.name for t in FUZZ_TOOLS]),
    arguments=json_values,
    raw=st.none() | st.text(max_size=20),
)
def test_execute_never_raises(name: str, arguments: Any, raw: str | None) -> None:
    the_call = ToolCall(id="f", name=name, arguments=arguments,
                        raw_arguments=raw if raw is not None else json.dumps(arguments))
    observation = asyncio.run(execute(FUZZ_REGISTRY, the_call))
    assert isinstance(observation, Observation) and isinstance(observation.output, str)
    if observation.is_error and not observation.output.startswith("Error executing"):
        assert "Schema: " in observation.output or "schema" in observation.output
    toolbox_of(FUZZ_REGISTRY).needs_approval(the_call)

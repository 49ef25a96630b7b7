"""The tools the MCP conformance suite's server scenarios call, for ``miniagent mcp-serve``.

Served with the built-in tools (``--tools builtin --tools mcp_conformance_tools.py``). The
names and what each must return are the suite's; ``test_simple_text`` has no docstring on
purpose (``tools-list`` requires every tool to have a description).
"""

from __future__ import annotations

from typing import Any

from miniagent import Tool, ToolError, tool


@tool
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@tool
def test_error_handling() -> str:
    """Fail on purpose: the result is an error."""
    raise ToolError("This tool intentionally returns an error for testing")


def _register(arguments: dict[str, Any]) -> str:
    return f"registered {arguments.get('name', 'nobody')}"


json_schema_2020_12_tool = Tool.from_schema(
    name="json_schema_2020_12_tool",
    description="A schema with JSON Schema 2020-12 keywords ($schema, $defs, $ref).",
    parameters={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"type": "object", "properties": {
            "street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
    fn=_register)

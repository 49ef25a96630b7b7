"""MCP client against @modelcontextprotocol/server-everything (npm), over stdio and HTTP.

Nobody here wrote that server: the results are what a real MCP server sends (text, an image,
resource links, structured content, a slow operation).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator

import pytest
from mcp_support import descendants, everything_entry, everything_url, no_orphans, node, wait_gone

from miniagent import Agent, ScriptedModel
from miniagent.core.types import ToolCall
from miniagent.mcp import MCPServer, ToolRule

__all__ = ["everything_url", "no_orphans"]  # fixtures used below


def stdio_everything(**options: object) -> MCPServer:
    return MCPServer.stdio(node(), args=[str(everything_entry()), "stdio"],
                           errlog=subprocess.DEVNULL, **options)  # type: ignore[arg-type]


@pytest.fixture(params=["stdio", "http"])
async def everything(request: pytest.FixtureRequest) -> AsyncIterator[MCPServer]:
    if request.param == "stdio":
        server = stdio_everything(rules={"trigger-long-running-operation": ToolRule(timeout=1)})
    else:
        url = request.getfixturevalue("everything_url")
        server = MCPServer.http(url, rules={"trigger-long-running-operation": ToolRule(timeout=1)})
    try:
        yield server
    finally:
        await server.aclose()


async def call(server: MCPServer, name: str, **arguments: object) -> tuple[str, bool]:
    await server.list_tools()
    observation = await server.call_tool(ToolCall(id="c1", name=name, arguments=arguments))
    return observation.output, observation.is_error


async def test_lists_the_servers_tools_with_their_schemas(everything: MCPServer) -> None:
    tools = {t.name: t for t in await everything.list_tools()}
    assert {"echo", "get-sum", "get-tiny-image", "get-resource-links"} <= set(tools)
    assert tools["get-sum"].parameters["required"] == ["a", "b"]
    assert tools["echo"].idempotent  # the server annotates it read-only


async def test_text_result(everything: MCPServer) -> None:
    assert await call(everything, "echo", message="héllo 你好") == ("Echo: héllo 你好", False)


async def test_image_is_summarised_not_inlined(everything: MCPServer) -> None:
    output, is_error = await call(everything, "get-tiny-image")
    assert not is_error
    assert "[image: image/png, " in output and " kB]" in output
    assert "iVBOR" not in output  # no base64 PNG in the prompt
    assert len(output) < 300


async def test_resource_links_are_listed(everything: MCPServer) -> None:
    output, _ = await call(everything, "get-resource-links", count=2)
    assert "[resource link: Blob Resource 1 <demo://resource/dynamic/blob/1>" in output
    assert "<demo://resource/dynamic/text/2>" in output


async def test_structured_content_is_preferred(everything: MCPServer) -> None:
    output, is_error = await call(everything, "get-structured-content", location="Chicago")
    assert not is_error
    assert output.startswith('{"temperature": ') and '"humidity"' in output
    assert output.count("temperature") == 1  # the repeated text part is left out


async def test_invalid_arguments_come_back_as_an_error(everything: MCPServer) -> None:
    output, is_error = await call(everything, "get-resource-reference", resourceType="Nope",
                                  resourceId=1)
    assert is_error
    assert "Text" in output and "Blob" in output  # what is valid, for the model to repair


async def test_a_long_running_tool_times_out(everything: MCPServer) -> None:
    output, is_error = await call(everything, "trigger-long-running-operation", duration=8,
                                  steps=2)
    assert is_error
    assert "did not answer within 1 s" in output
    # the connection is still usable afterwards
    assert await call(everything, "get-sum", a=2, b=3) == ("The sum of 2 and 3 is 5.", False)


async def test_an_agent_uses_the_servers_tools(everything: MCPServer) -> None:
    model = ScriptedModel([
        'Thought: add\nAction: get-sum\nAction Input: {"a": "20", "b": 22}',
        "Thought: done\nFinal Answer: 42",
    ])
    agent = Agent(model=model, tools=[everything])
    try:
        result = await agent.arun("What is 20 + 22?")
    finally:
        await agent.aclose()
    assert (result.status, result.final_answer) == ("completed", "42")
    observation = result.steps[0].observations[0]
    assert observation.output == "The sum of 20 and 22 is 42."  # "20" coerced to a number


def test_stdio_server_is_gone_after_a_sync_run() -> None:
    before = descendants()
    model = ScriptedModel(['Thought: t\nAction: echo\nAction Input: {"message": "hi"}',
                           "Thought: t\nFinal Answer: hi"])
    result = Agent(model=model, tools=[stdio_everything()]).run("Say hi")
    assert result.final_answer == "hi"
    assert not wait_gone(descendants() - before)


"""``miniagent mcp-serve`` driven by the official ``mcp`` client, over stdio and HTTP."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_support import env, served_http, tools_file

import miniagent
from miniagent import Agent, ScriptedModel
from miniagent.mcp import MCPServer

__all__ = ["served_http", "tools_file"]  # fixtures

async def check_tools(client: Client) -> None:
    listed = await client.list_tools()
    assert sorted(t.name for t in listed.tools) == ["add", "greet", "key"]  # wipe left out
    add = next(t for t in listed.tools if t.name == "add")
    assert add.input_schema["required"] == ["a", "b"]
    result = await client.call_tool("add", {"a": "2", "b": 40})  # coerced like our own calls
    assert (result.content[0].text, result.is_error) == ("42", False)
    result = await client.call_tool("greet", {"name": "李雷"})
    assert result.content[0].text == "你好, 李雷!"
    result = await client.call_tool("add", {"a": 1})
    assert result.is_error and "Missing required argument(s): b" in result.content[0].text
    result = await client.call_tool("wipe", {"path": "/"})
    assert result.is_error and "Unknown tool 'wipe'" in result.content[0].text


async def test_mcp_serve_over_stdio(tools_file: Path) -> None:
    params = StdioServerParameters(command=sys.executable, env=env(), args=[
        "-m", "miniagent", "mcp-serve", "--tools", str(tools_file)])
    async with Client(params) as client:
        await check_tools(client)


async def test_mcp_serve_over_http_with_a_bearer_token(served_http: str) -> None:
    import httpx2

    headers = {"Authorization": "Bearer tok-3f9a-secret"}
    async with httpx2.AsyncClient(headers=headers) as http:
        from mcp.client.streamable_http import streamable_http_client

        async with Client(streamable_http_client(served_http, http_client=http)) as client:
            await check_tools(client)
    async with httpx2.AsyncClient() as http:
        answer = await http.post(served_http, json={"jsonrpc": "2.0", "id": 1,
                                                    "method": "tools/list"})
    assert answer.status_code == 401


async def test_our_client_reaches_our_server_with_its_token(
        served_http: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # everything any library logs, HTTP clients included
    model = ScriptedModel(['Thought: t\nAction: key\nAction Input: {}',
                           "Thought: t\nFinal Answer: ok"])
    good = MCPServer.http(served_http, headers={"Authorization": "Bearer tok-3f9a-secret"})
    agent = Agent(model=model, tools=[good])
    try:
        result = await agent.arun("key?")
    finally:
        await agent.aclose()
    record = result.steps[0].calls[0]
    assert record.observation is not None
    # the key our client sent in _meta is the one the served tool sees
    assert record.observation.output == f"{result.session_id}:{record.call.id}"
    bad = MCPServer.http(served_http, headers={"Authorization": "Bearer wrong"},
                         connect_timeout=10)
    with pytest.raises(miniagent.errors.ToolDefinitionError, match="cannot list the tools"):
        await bad.list_tools()
    await bad.aclose()
    assert caplog.records  # the libraries did log
    assert "tok-3f9a-secret" not in caplog.text

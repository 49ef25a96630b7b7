"""``miniagent mcp-serve`` driven by the official ``mcp`` client, over stdio and HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_support import stop

import miniagent
from miniagent import Agent, ScriptedModel
from miniagent.mcp import MCPServer

SRC = str(Path(miniagent.__file__).parents[1])
TOOLS = '''
from miniagent import tool, tool_context


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"你好, {name}!"


@tool
def key() -> str:
    """The idempotency key of this call."""
    return tool_context().idempotency_key


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a file (needs a person's approval)."""
    raise AssertionError("never served")
'''


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "served_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return path


def env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
            "SERVE_TOKEN": "tok-3f9a-secret"}


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


@pytest.fixture
def served_http(tools_file: Path) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", "mcp-serve", "--tools", str(tools_file),
         "--http", "127.0.0.1:0", "--token-env", "SERVE_TOKEN"],
        env={**os.environ, **env()}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        lines: list[str] = []
        match = None
        while match is None and time.monotonic() < deadline:  # bounded by the deadline
            lines.append(process.stderr.readline())
            if not lines[-1] and process.poll() is not None:
                break
            match = re.search(r"serving 3 tools at (http://127\.0\.0\.1:\d+/mcp)", lines[-1])
        assert match, f"mcp-serve did not start: {lines!r}"
        assert "not serving wipe (they require approval)" in lines[0]
        yield match.group(1)
    finally:
        stop(process)  # type: ignore[arg-type]


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


async def test_our_client_reaches_our_server_with_its_token(served_http: str) -> None:
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

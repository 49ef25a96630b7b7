"""``miniagent mcp-serve`` driven by the official ``mcp`` client, over stdio and HTTP."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import env, served_http, tools_file

import miniagent
from mcp import Client, StdioServerParameters
from miniagent import Agent, ScriptedModel
from miniagent.mcp import MCPServer

__all__ = ["served_http", "tools_file"]  # fixtures

HEADERS = {"Authorization": "Bearer tok-3f9a-secret", "Accept": "application/json, "
           "text/event-stream", "Content-Type": "application/json"}
HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}
"""What a raw streamable-HTTP client sends first (with the served token)."""

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
        info = client.server_info
        assert (info.name, info.version) == ("miniagent", importlib.metadata.version("miniagent"))
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
    # the key our client sent in _meta reaches the served tool, scoped to this client's
    # connection: another client sending the same key gets another one
    served, client, sent = record.observation.output.split(":", 2)
    assert served.startswith("mcp-serve-") and client
    assert sent == f"{result.session_id}:{record.call.id}"
    bad = MCPServer.http(served_http, headers={"Authorization": "Bearer wrong"},
                         connect_timeout=10)
    with pytest.raises(miniagent.core.errors.ToolDefinitionError) as refused:
        await bad.list_tools()
    await bad.aclose()
    assert str(refused.value) == (
        f"cannot list the tools of MCP server {served_http}: MCP error -32603: HTTP 401 "
        "Unauthorized: check the token (the server says: missing or wrong token)")
    assert caplog.records  # the libraries did log
    assert "tok-3f9a-secret" not in caplog.text


async def test_dns_rebinding_is_refused(served_http: str) -> None:
    """A page at another name that resolves here sends its own Host and Origin: refused."""
    import httpx2

    headers, hello = HEADERS, HELLO
    async with httpx2.AsyncClient() as http:
        good = await http.post(served_http, json=hello, headers=headers)
        evil_host = await http.post(served_http, json=hello,
                                    headers={**headers, "Host": "evil.example:80"})
        evil_origin = await http.post(served_http, json=hello,
                                      headers={**headers, "Origin": "http://evil.example"})
    assert good.status_code == 200
    assert evil_host.status_code in (400, 421) and evil_origin.status_code == 403


def test_a_non_loopback_address_needs_a_token(tools_file: Path) -> None:
    command = [sys.executable, "-m", "miniagent", "mcp-serve", "--tools", str(tools_file),
               "--http", "0.0.0.0:0"]
    refused = subprocess.run(command, env={**os.environ, **env()}, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0
    assert "without a token: give --token-env NAME (or --insecure" in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("miniagent: refusing to serve")


async def test_concurrent_calls_are_bounded(tmp_path: Path) -> None:
    """200 clients' worth of calls of a sync tool: at most MAX_CALLS run (one thread each)."""
    from miniagent.mcp.serve import MAX_CALLS

    (tmp_path / "slow.py").write_text(
        "import threading, time\nfrom miniagent import tool\nlock = threading.Lock()\n"
        "now = [0, 0]\n\n@tool\ndef slow(n: int) -> str:\n    '''Slow.'''\n"
        "    with lock:\n        now[0] += 1\n        now[1] = max(now)\n"
        "    time.sleep(0.05)\n    with lock:\n        now[0] -= 1\n    return str(now[1])\n",
        encoding="utf-8")
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "miniagent", "mcp-serve", "--tools",
                                      str(tmp_path / "slow.py")],
        env={**os.environ, **env()})
    async with Client(stdio_client(params)) as client:
        results = await asyncio.gather(*(client.call_tool("slow", {"n": i}) for i in range(60)))
    most = max(int(r.content[0].text) for r in results)  # type: ignore[union-attr]
    assert 1 < most <= MAX_CALLS


async def test_a_tool_without_a_docstring_is_served_with_a_description(tmp_path: Path) -> None:
    """Clients that require a description (the conformance suite's tools-list) accept it."""
    (tmp_path / "bare.py").write_text(
        "from miniagent import tool\n\n@tool\ndef get_weather(city: str) -> str:\n"
        "    return city\n", encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "miniagent", "mcp-serve", "--tools",
                                      str(tmp_path / "bare.py")],
        env={**os.environ, **env()})
    async with Client(params) as client:
        listed = await client.list_tools()
    assert [(t.name, t.description) for t in listed.tools] == [("get_weather", "Get weather.")]


async def test_rebinding_protection_holds_on_any_address(tools_file: Path) -> None:
    """The SDK protects only 127.0.0.1, localhost and ::1 by itself: on another address (here
    127.0.0.2, still loopback) the Host and Origin checks hold too."""
    import re
    import time

    import httpx2

    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", "mcp-serve", "--tools", str(tools_file), "--http",
         "127.0.0.2:0", "--token-env", "SERVE_TOKEN", "--allow-host", "tools.internal"],
        env={**os.environ, **env()}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL)
    try:
        assert process.stderr is not None
        url, deadline = None, time.monotonic() + 30
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line and process.poll() is not None:
                break
            found = re.search(r"(http://127\.0\.0\.2:\d+/mcp)", line)
            url = found.group(1) if found else None
        assert url, "mcp-serve did not start"
        port = url.split(":")[2].split("/")[0]
        headers, hello = HEADERS, HELLO
        async with httpx2.AsyncClient() as http:
            statuses = [(await http.post(url, json=hello, headers={**headers, **extra}))
                        .status_code for extra in (
                            {}, {"Host": f"tools.internal:{port}"},
                            {"Host": "evil.example"}, {"Origin": "http://evil.example"})]
        assert statuses[:2] == [200, 200] and statuses[2] in (400, 421) and statuses[3] == 403
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_a_client_that_never_ends_its_sessions_is_not_locked_out(served_http: str) -> None:
    """Past MAX_SESSIONS_PER_CLIENT sessions from one address (none ended with DELETE, as the
    TypeScript SDK's clients do), a new one is served and the least recently used idle one is
    ended; a session with a request in flight (an open stream) never is; a client at another
    address (127.0.0.2) keeps its own."""
    import httpx2

    from miniagent.mcp.serve import MAX_SESSIONS, MAX_SESSIONS_PER_CLIENT

    assert MAX_SESSIONS_PER_CLIENT < MAX_SESSIONS
    headers, hello = HEADERS, HELLO
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

    async def open_session(http: httpx2.AsyncClient) -> str:
        answer = await http.post(served_http, json=hello)
        assert answer.status_code == 200
        return answer.headers["mcp-session-id"]

    async def status(http: httpx2.AsyncClient, session: str) -> int:
        answer = await http.post(served_http, json=ping, headers={"mcp-session-id": session})
        return answer.status_code

    other = httpx2.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx2.AsyncClient(headers=headers, timeout=30) as first, \
            httpx2.AsyncClient(headers=headers, transport=other, timeout=30) as second:
        theirs = await open_session(second)
        opened = [await open_session(first) for _ in range(MAX_SESSIONS_PER_CLIENT)]
        assert await status(first, opened[0]) == 200  # the oldest, used again
        async with first.stream("GET", served_http,  # the second: a stream held open
                                headers={"mcp-session-id": opened[1]}) as stream:
            assert stream.status_code == 200
            newer = [await open_session(first) for _ in range(2)]  # the 17th and 18th
            assert [await status(first, s) for s in opened[2:4]] == [404, 404]
            assert [await status(first, s) for s in (opened[0], opened[1], *newer)] == [200] * 4
        assert await status(second, theirs) == 200
        ended = await first.delete(served_http, headers={"mcp-session-id": newer[0]})
        assert ended.status_code == 200
        await open_session(first)  # room again: no session of the client is ended
        assert await status(first, opened[4]) == 200


def test_half_sent_requests_are_closed_and_a_client_is_served_meanwhile(
        served_http: str) -> None:
    """50 requests whose head never ends (slowloris) are closed by mcp-serve within a bounded
    wait (its limit is 10 s); a JSON-RPC request is answered while they are open."""
    from urllib.parse import urlsplit

    import httpx2

    from miniagent.testing.slow_clients import closed_by_server, stalled_requests

    port = urlsplit(served_http).port
    assert port is not None
    with stalled_requests(port, 50, path="/mcp", wait=60) as stalled:
        answer = httpx2.post(served_http, json=HELLO, headers=HEADERS, timeout=30)
        assert answer.status_code == 200 and "miniagent" in answer.text
        assert all(closed_by_server(sock) for sock in stalled)

"""MCP servers that misbehave: answers past the cap, refusals, exits at start, output that is
not MCP. Each ends in one clear line naming the cause, with memory bounded and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from mcp_hostile_http import _bomb, hostile_mcp
from mcp_support import SRC, no_orphans

from miniagent.core.errors import ToolDefinitionError
from miniagent.core.types import ToolCall
from miniagent.mcp import MCPServer, ToolRule

__all__ = ["no_orphans"]  # fixture

CAP = "over the 33,554,432 byte limit (MAX_RESPONSE_BYTES, 32 MiB)"


# -- what miniagent reads over HTTP -------------------------------------------------------

@pytest.mark.parametrize("mode", ["endless", "declared", "gzip"])
async def test_an_answer_past_the_cap_fails_with_the_limit_and_memory_stays_bounded(
        mode: str) -> None:
    """An endless chunked body, a declared gigabyte, 128 MiB packed in a small gzip body."""
    _bomb()  # packed before measuring
    with hostile_mcp(mode) as (url, state):
        server = MCPServer.http(url)
        tracemalloc.start()
        try:
            with pytest.raises(ToolDefinitionError) as caught:
                await server.list_tools()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await server.aclose()
    assert "tools/list" in state.methods
    assert f"cannot list the tools of MCP server {url}" in str(caught.value)
    assert CAP in str(caught.value)
    assert peak < 96 << 20  # the cap (32 MiB) and the pieces read, not the 128 MiB answer
    assert state.sent < 64 << 20  # the client stopped reading (socket buffers aside)


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a new Python process, as a user's program would run it."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONPATH": SRC})


LIST_TOOLS = """
import asyncio, sys
from miniagent.mcp import MCPServer

async def main():
    server = {server}
    try:
        await server.list_tools()
    except Exception as exc:
        print(exc)
    finally:
        await server.aclose()

asyncio.run(main())
"""


def test_the_cap_is_one_line_without_the_sdks_traceback() -> None:
    with hostile_mcp("endless") as (url, _):
        out = run_script(LIST_TOOLS.format(server=f"MCPServer.http({url!r})"))
    assert CAP in out.stdout
    assert "Traceback" not in out.stderr, out.stderr


# -- errors that say their cause ----------------------------------------------------------

async def test_an_oauth_refusal_with_a_json_body_names_its_status() -> None:
    with hostile_mcp("oauth") as (url, state):
        server = MCPServer.http(url, connect_timeout=10)
        try:
            with pytest.raises(ToolDefinitionError) as caught:
                await server.list_tools()
        finally:
            await server.aclose()
    assert state.methods  # it was asked, and refused
    assert str(caught.value) == (
        f"cannot list the tools of MCP server {url}: MCP error -32603: HTTP 401 Unauthorized: "
        'check the token (the server says: {"error": "invalid_token", "error_description": '
        '"The access token expired"})')


@pytest.mark.usefixtures("no_orphans")
async def test_a_stdio_server_that_exits_at_start_is_told_with_its_stderr(
        capsys: pytest.CaptureFixture[str]) -> None:
    script = ("import sys\nfor i in range(5000): print('noise', i, file=sys.stderr)\n"
              "print('ModuleNotFoundError: no module named 服务', file=sys.stderr)\n"
              "sys.exit(2)")
    server = MCPServer.stdio(sys.executable, args=["-c", script], name="broken")
    with pytest.raises(ToolDefinitionError) as caught:
        await server.list_tools()
    await server.aclose()
    message = str(caught.value)
    assert message == ("cannot list the tools of MCP server broken: it exited; its stderr "
                       "ends: noise 4998 | noise 4999 | ModuleNotFoundError: no module "
                       "named 服务")
    err = capsys.readouterr().err  # still passed on to our stderr, whole
    assert "noise 0\n" in err and "no module named 服务" in err


@pytest.mark.usefixtures("no_orphans")
async def test_a_stdio_servers_stderr_still_reaches_its_log_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("w", encoding="utf-8") as errlog:
        server = MCPServer.stdio(sys.executable, args=[
            "-c", "import sys; print('启动失败: bad flag', file=sys.stderr); sys.exit(1)"],
            errlog=errlog)
        with pytest.raises(ToolDefinitionError, match="its stderr ends: 启动失败: bad flag"):
            await server.list_tools()
        await server.aclose()
    assert log.read_text(encoding="utf-8") == "启动失败: bad flag\n"


GARBAGE = ("import sys, time\nfor i in range(3): print('hello, 世界 not json', i, flush=True)\n"
           "time.sleep(60)")


def test_output_that_is_not_mcp_is_one_clear_line_not_a_timeout() -> None:
    server = (f"MCPServer.stdio(sys.executable, args=['-c', {GARBAGE!r}], name='chatty', "
              "connect_timeout=10)")
    out = run_script(LIST_TOOLS.format(server=server))
    assert out.stdout.strip() == (
        "cannot list the tools of MCP server chatty: it wrote output that is not MCP on its "
        "stdout ('hello, 世界 not json 0'): it is not an MCP server, or it logs to stdout")
    assert "Traceback" not in out.stderr and "Failed to parse" not in out.stderr, out.stderr


@pytest.mark.usefixtures("no_orphans")
async def test_a_call_that_meets_output_that_is_not_mcp_says_so() -> None:
    chatty = Path(__file__).with_name("mcp_chatty_server.py")
    server = MCPServer.stdio(sys.executable, args=[str(chatty)], errlog=subprocess.DEVNULL,
                             rules={"chatter": ToolRule(timeout=1)})
    try:
        await server.list_tools()
        observation = await server.call_tool(ToolCall(id="c", name="chatter", arguments={}))
    finally:
        await server.aclose()
    assert observation.is_error
    assert observation.output == (
        "MCP tool 'chatter' did not answer within 1 s (call timeout); it wrote output that is "
        "not MCP on its stdout ('progress: 50%'): it is not an MCP server, or it logs to "
        "stdout.")


@pytest.mark.usefixtures("no_orphans")
async def test_a_server_that_dies_during_a_call_is_told_with_its_stderr() -> None:
    chatty = Path(__file__).with_name("mcp_chatty_server.py")
    server = MCPServer.stdio(sys.executable, args=[str(chatty)], errlog=subprocess.DEVNULL,
                             name="chatty")
    try:
        await server.list_tools()
        observation = await server.call_tool(ToolCall(id="c", name="crash", arguments={}))
    finally:
        await server.aclose()
    assert observation.is_error
    assert observation.output == (
        "MCP server chatty closed the connection during 'crash' (it exited; its stderr ends: "
        "Traceback (most recent call last): | RuntimeError: 内存不足); the call's outcome is "
        "unknown. The server is started again on the next call.")

"""The docs' MCP example runs: a stub endpoint, the real mcp-server-time."""

from __future__ import annotations

import pytest

from docs_pages import block_with
from miniagent.testing.stub_server import StubServer


def test_mcp_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = block_with("clock = MCPServer.stdio(")
    call = {"content": None, "tool_calls": [
        {"name": "clock_get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]}
    with StubServer([call, "It is evening in Tokyo."]).run_in_thread() as stub:
        exec(code.replace("http://127.0.0.1:8000/v1", stub.base_url), {})
        received = list(stub.requests)
    assert capsys.readouterr().out == "completed It is evening in Tokyo.\n"
    offered = {t["function"]["name"] for t in received[0]["tools"]}
    assert offered == {"clock_get_current_time", "clock_convert_time"}
    observation = next(m["content"] for m in received[1]["messages"] if m["role"] == "tool")
    assert '"timezone": "Asia/Tokyo"' in observation and "+09:00" in observation

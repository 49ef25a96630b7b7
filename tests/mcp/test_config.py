"""MCP server configuration: names, filters, rules, and records without secrets."""

from __future__ import annotations

import json
import re

import pytest

from miniagent.core.errors import ConfigError
from miniagent.core.tools.wrappers import exposed_name, first_rule, is_offered
from miniagent.mcp import MCPServer, ServerConfig, ToolRule

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.mark.parametrize(("name", "prefix", "expected"), [
    ("get_time", None, "get_time"),
    ("get-time", "clock", "clock_get-time"),
    ("files/read.v2", None, "files_read_v2"),
    ("天気", None, "__"),
])
def test_exposed_names(name: str, prefix: str | None, expected: str) -> None:
    assert exposed_name(name, prefix) == expected


def test_long_names_are_cut_and_kept_apart() -> None:
    a, b = exposed_name("x" * 80 + "a", "p"), exposed_name("x" * 80 + "b", "p")
    assert VALID.match(a) and VALID.match(b) and a != b


def test_filters_and_rules_match_patterns() -> None:
    assert is_offered("read_file", None, ())
    assert not is_offered("delete_file", None, ["delete_*"])
    assert is_offered("read_file", ["read_*"], ()) and not is_offered("write", ["read_*"], ())
    rules = {"delete_*": ToolRule(requires_approval=True), "*": ToolRule(timeout=5)}
    assert first_rule("delete_all", rules).requires_approval is True
    assert first_rule("list", rules).timeout == 5
    assert first_rule("x", {}) == ToolRule()


def test_records_leave_secrets_out() -> None:
    server = MCPServer.http("https://mcp.example/mcp", headers={"Authorization": "Bearer s3"},
                            prefix="ex")
    stdio = MCPServer.stdio("srv", args=["--x"], env={"API_KEY": "k3y"})
    for item in (server, stdio):
        text = json.dumps(item.record()) + repr(item) + repr(item.config)
        assert "s3" not in text and "k3y" not in text
    assert server.record()["header_names"] == ["Authorization"]
    assert stdio.record()["env_names"] == ["API_KEY"]
    rebuilt = ServerConfig.from_record(server.record(), headers={"Authorization": "Bearer s3"})
    assert rebuilt == server.config


@pytest.mark.parametrize("build", [
    lambda: MCPServer.http("ftp://x"),
    lambda: MCPServer.stdio(""),
    lambda: MCPServer.stdio("x", prefix="bad prefix"),
    lambda: MCPServer.stdio("x", call_timeout=0),
    lambda: ToolRule(timeout=-1),
])
def test_bad_configuration_is_a_clear_error(build: object) -> None:
    with pytest.raises(ConfigError):
        build()  # type: ignore[operator]


def test_records_keep_no_credential_and_references_expand_where_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIME_TOKEN", "tok-123456")
    server = MCPServer.stdio("mcp-x", args=["--token", "live-998877", "--api-key=k-554433",
                                            "--auth-token", "${TIME_TOKEN}", "--port", "8"])
    record = server.record()
    assert record["args"] == ["--token", "[REDACTED]", "--api-key=[REDACTED]",
                              "--auth-token", "${TIME_TOKEN}", "--port", "8"]
    assert "live-998877" not in server.config.label
    assert server.config.expanded().args[4] == "tok-123456"  # what the server is started with
    http = MCPServer.http("https://ann:pw-1@mcp.example/mcp?token=qq-8877&team=a&key=${K}")
    url = http.record()["url"]
    assert "pw-1" not in url and "qq-8877" not in url and "team=a" in url and "${K}" in url
    with pytest.raises(ConfigError, match="environment variable K is not set"):
        http.config.expanded()


def test_the_cli_records_mcp_lines_and_urls_without_credentials() -> None:
    from miniagent.cli.build import RunConfig

    config = RunConfig(mcp=["server --token live-1234567 --x 1"],
                       mcp_urls=["http://127.0.0.1:9/mcp?api_key=abc-998877"])
    saved = config.metadata()["cli"]
    assert saved["mcp"] == ["server --token '[REDACTED]' --x 1"]
    assert saved["mcp_urls"] == ["http://127.0.0.1:9/mcp?api_key=[REDACTED]"]


def test_each_sdk_traceback_we_report_ourselves_is_quieted() -> None:
    import logging

    from miniagent.mcp.connection import quiet_sdk_tracebacks
    from miniagent.mcp.http import ResponseTooLarge

    quiet_sdk_tracebacks()
    quiet_sdk_tracebacks()  # installed once
    for name, message, error in (
            ("mcp.client.streamable_http", "Error parsing JSON response", ResponseTooLarge(1)),
            ("mcp.client.streamable_http", "Error parsing SSE message", ValueError("bad")),
            ("mcp.client.stdio", "Failed to parse JSONRPC message from server",
             ValueError("bad"))):
        logger = logging.getLogger(name)
        assert len([f for f in logger.filters if getattr(f, "message", None) == message]) == 1
        record = logger.makeRecord(name, logging.ERROR, __file__, 1, message, (),
                                   (type(error), error, None))
        for f in logger.filters:
            f.filter(record)
        assert (record.levelno, record.exc_info) == (logging.DEBUG, None), message


@pytest.mark.timeout(20)
async def test_a_stderr_destination_that_blocks_does_not_stop_the_event_loop() -> None:
    import io
    import threading

    from miniagent.mcp.stderr import PENDING_MAX, StderrTail

    release = threading.Event()

    class Stuck(io.StringIO):  # our stderr piped into a paused pager
        def write(self, text: str) -> int:
            release.wait(120)
            return super().write(text)

    target = Stuck()
    tail = StderrTail(target)
    tail.data_received("启动 line 1\n".encode())  # before: the event loop stopped here
    tail.data_received(b"x" * (PENDING_MAX + 1) + b"\nthe end\n")
    tail.data_received(b"more\n")  # past the pending bound: kept, not queued
    assert tail.last_lines(2) == ["the end", "more"]
    release.set()
    tail.close()
    assert target.getvalue().startswith("启动 line 1\nxxx") and "more" not in target.getvalue()

"""MCP server configuration: names, filters, rules, and records without secrets."""

from __future__ import annotations

import json
import re

import pytest

from miniagent.errors import ConfigError
from miniagent.mcp import MCPServer, ServerConfig, ToolRule
from miniagent.tools.wrappers import exposed_name, first_rule, is_offered

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

"""Parsing the CLI's MCP options."""

from __future__ import annotations

import subprocess

import pytest

from miniagent.cli.mcp_cmd import mcp_servers, parse_headers
from miniagent.core.errors import ConfigError


def test_headers_from_options_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_headers(["Authorization: Bearer a:b", "X-Team:  blue "]) == {
        "Authorization": "Bearer a:b", "X-Team": "blue"}
    monkeypatch.setenv("MINIAGENT_MCP_HEADERS", "Authorization: Bearer env\n")
    assert parse_headers(None) == {"Authorization": "Bearer env"}


def test_a_bad_header_does_not_repeat_its_value() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_headers(["Bearer-secret-without-colon"])
    assert "secret" not in str(caught.value)


def test_servers_from_command_lines_and_urls() -> None:
    servers = mcp_servers(['python -m "my server"'], ["http://127.0.0.1:1/mcp"],
                          headers={"A": "b"}, approve=["delete_*"])
    stdio, http = servers
    assert (stdio.config.command, stdio.config.args) == ("python", ("-m", "my server"))
    assert stdio.errlog == subprocess.DEVNULL
    assert http.config.headers == {"A": "b"}
    assert stdio.rules["delete_*"].requires_approval is True
    with pytest.raises(ConfigError):
        mcp_servers(['python "unclosed'], [], headers={}, approve=[])

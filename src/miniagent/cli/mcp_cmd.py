"""The CLI's MCP parts: ``--mcp`` / ``--mcp-url`` servers, and ``miniagent mcp-serve``."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from pathlib import Path
from typing import Annotated, Any

import typer

from miniagent._internal.wording import counted
from miniagent.core.errors import ConfigError

McpOption = Annotated[list[str] | None, typer.Option(
    "--mcp", help="An MCP server started as this command line, over stdio "
    "(e.g. \"python -m mcp_server_time\"). Repeatable.")]
McpUrlOption = Annotated[list[str] | None, typer.Option(
    "--mcp-url", help="An MCP server at this streamable HTTP URL. Repeatable.")]
McpHeaderOption = Annotated[list[str] | None, typer.Option(
    "--mcp-header", help="'Name: value' sent to every --mcp-url server, e.g. "
    "'Authorization: Bearer TOKEN'; never recorded or shown. Repeatable "
    "[env: MINIAGENT_MCP_HEADERS, lines of 'Name: value'].")]
McpApproveOption = Annotated[list[str] | None, typer.Option(
    "--mcp-approve", help="MCP tools (names or fnmatch patterns) that need approval before "
    "each call. Repeatable.")]


def parse_headers(values: list[str] | None) -> dict[str, str]:
    """``Name: value`` pairs from the options, else from MINIAGENT_MCP_HEADERS.

    Raises:
        ConfigError: a value without a colon (its text is not repeated: it may be a token).
    """
    lines = list(values or []) or (os.environ.get("MINIAGENT_MCP_HEADERS") or "").splitlines()
    headers: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ConfigError(f"MCP header {number} is not 'Name: value'")
        headers[name.strip()] = value.strip()
    return headers


def header_secrets(headers: dict[str, str]) -> list[str]:
    """The header values to keep out of traces: each whole, and the credential after a scheme
    word (``Bearer abc`` gives ``abc`` too)."""
    found: list[str] = []
    for value in headers.values():
        found += [value, *value.split()[1:]] if value else []
    return found


def mcp_servers(commands: list[str], urls: list[str], *, headers: dict[str, str],
                approve: list[str], verbose: bool = False) -> list[Any]:
    """The MCP servers of a run, in option order; a bad command line is a clear error."""
    if not (commands or urls):
        return []
    from miniagent.mcp import MCPServer, ToolRule
    from miniagent.mcp.connection import sdk

    sdk()  # without the mcp extra: one line now, not a failed warm-up then a failed listing
    rules = {pattern: ToolRule(requires_approval=True) for pattern in approve}
    errlog = None if verbose else subprocess.DEVNULL  # a server's logs would cut the display
    servers: list[Any] = []
    for line in commands:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise ConfigError(f"cannot split the --mcp command {line!r}: {exc}") from None
        if not words:
            raise ConfigError("an --mcp command is empty")
        servers.append(MCPServer.stdio(words[0], args=words[1:], rules=rules, errlog=errlog))
    servers.extend(MCPServer.http(url, headers=headers or None, rules=rules) for url in urls)
    return servers


def mcp_serve(
    tools: Annotated[list[str], typer.Option("--tools", help="A Python file or module whose @tool functions are served, or 'builtin'. Repeatable.")],  # noqa: E501
    http: Annotated[str | None, typer.Option("--http", help="Serve streamable HTTP on HOST:PORT (at /mcp) instead of stdio; port 0 picks a free one.")] = None,  # noqa: E501
    token_env: Annotated[str | None, typer.Option("--token-env", help="With --http: require 'Authorization: Bearer <value of this environment variable>'.")] = None,  # noqa: E501
    workspace: Annotated[Path, typer.Option(help="Root for the built-in file tools.")] = Path("."),
    allow_host: Annotated[list[str] | None, typer.Option("--allow-host", help="With --http: a host name clients use to reach this server (Host and Origin headers are checked; loopback names and the bound address always pass). Repeatable.")] = None,  # noqa: E501
    insecure: Annotated[bool, typer.Option("--insecure", help="With --http on a non-loopback address: serve even without --token-env (anyone who reaches the port can run the tools).")] = False,  # noqa: E501
) -> None:
    """Serve the @tool functions of a tools file to any MCP client (stdio, or HTTP)."""
    from miniagent.cli.common import cli_errors
    from miniagent.cli.loading import load_tools
    from miniagent.cli.safe_text import visible
    from miniagent.mcp.serve import (
        build_server,
        is_loopback,
        serve_http,
        serve_stdio,
        served_tools,
    )

    with cli_errors():
        registry = load_tools(tools, workspace.resolve())
        _, left_out = served_tools(registry)
        if left_out:
            typer.echo(visible(f"miniagent mcp-serve: not serving {', '.join(left_out)} "
                               "(approval required)"), err=True)
        server = build_server(registry)
        if http is None:
            if token_env:
                raise ConfigError("--token-env only applies with --http")
            asyncio.run(serve_stdio(server))
            return
        host, port = _host_port(http)
        token = _token(token_env)
        if token is None and not is_loopback(host):
            if not insecure:
                raise ConfigError(f"refusing to serve the tools on {host}, which other machines "
                                  "reach, without a token: give --token-env NAME (or "
                                  "--insecure, to do it anyway)")
            typer.echo(f"miniagent mcp-serve: WARNING: serving on {host} without a token; "
                       "anyone who reaches this port can run every tool", err=True)

        def ready(bound: int) -> None:
            served = counted(len(registry) - len(left_out), "tool")
            typer.echo(f"miniagent mcp-serve: serving {served} at http://{host}:{bound}/mcp",
                       err=True)

        asyncio.run(serve_http(server, host=host, port=port, token=token,
                               allowed_hosts=list(allow_host or []), on_ready=ready))


def _host_port(value: str) -> tuple[str, int]:
    host, colon, port = value.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--http takes HOST:PORT (e.g. 127.0.0.1:8765), got {value!r}")
    return host.strip("[]"), int(port)


def _token(name: str | None) -> str | None:
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"--token-env {name}: that environment variable is not set")
    return value

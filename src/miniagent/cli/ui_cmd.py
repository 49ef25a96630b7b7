"""``miniagent ui``: the browser inbox on a local port (see :mod:`miniagent.ui`)."""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from miniagent.cli.common import StoreOption, cli_errors, fail
from miniagent.cli.safe_text import visible
from miniagent.cli.temporal_cmd import TaskQueueOption, TemporalOption
from miniagent.core.errors import ConfigError

if TYPE_CHECKING:
    from miniagent.core.agent import Agent
    from miniagent.core.session import AgentSession
    from miniagent.core.store.sqlite import SQLiteStore

DEFAULT_PORT = 8321


def ui(
    store: StoreOption = None,
    host: Annotated[str, typer.Option(help="The address to listen on. Any but a loopback one needs --token-env.")] = "127.0.0.1",  # noqa: E501
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port (0: any free one).")] = DEFAULT_PORT,  # noqa: E501
    token_env: Annotated[str | None, typer.Option("--token-env", metavar="NAME", help="The environment variable holding the login token (at least 16 characters); required off loopback. Without it, one is drawn at start and printed.")] = None,  # noqa: E501
    trace: Annotated[Path | None, typer.Option("--trace", help="A JSONL trace file: runs started in the inbox are appended to it, and sessions with runs in it link to their trace report.")] = None,  # noqa: E501
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "miniagent",
    evals: Annotated[Path | None, typer.Option("--evals", metavar="DIR", help="A folder holding eval output folders (miniagent eval --out): their reports and traces are shown under /evals.")] = None,  # noqa: E501
) -> None:
    """Serve the browser inbox: approve or deny waiting calls, follow and inspect sessions.

    A session goes on (after a decision, Resume, or a new question) in this process, with the
    model server, tools and MCP servers it recorded, as 'miniagent sessions resume' would run
    it; the API key comes from MINIAGENT_API_KEY or OPENAI_API_KEY. With --temporal, the
    sessions of that cluster: a decision goes to the workflow, whose workers go on with it.

    Every address needs a login, loopback included (other users of this machine reach it
    too): open the one-time link printed at start, or type the token (drawn at start, or
    the one in --token-env).
    """
    from miniagent.cli.build import open_store

    with cli_errors():  # a missing extra is one line too
        import uvicorn

        from miniagent.ui import app
        from miniagent.ui.security import LOOPBACK_HOSTS

    token, drawn = _token(host, token_env)
    hosts = (*LOOPBACK_HOSTS, host.strip("[]")) if _loopback(host) else ("*",)
    with cli_errors():
        if temporal:
            where = f"sessions on Temporal {temporal}"
            inbox = app(temporal=temporal, task_queue=task_queue, token=token,
                        allowed_hosts=hosts, where=where, evals=evals)
        else:
            sessions = open_store(store)
            where = f"sessions in {sessions.path}"
            inbox = app(store=sessions, agent_for=lambda s: _agent_for(s, sessions),
                        token=token, allowed_hosts=hosts, trace=trace, where=where,
                        evals=evals, runs_with=_runs_with)
        if evals is not None and not evals.is_dir():
            raise fail(f"--evals {evals}: no such folder")
        listener = _listen(host, port)
    bound = listener.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{shown}:{bound[1]}/"
    typer.echo(visible(f"miniagent inbox on {url} ({where}); Ctrl-C stops it"))
    typer.echo(f"log in: {url}login?once={inbox.state.gate.new_link()} (works once, for 15 "
               "minutes)")
    if drawn:
        typer.echo(f"or type this token at {url}login: {token}")
    else:
        typer.echo(visible(f"or type the token in ${token_env} at {url}login"))
    from miniagent._internal.web_limits import uvicorn_options

    server = uvicorn.Server(uvicorn.Config(inbox, log_level="warning", lifespan="on",
                                           proxy_headers=False, server_header=False,
                                           **uvicorn_options()))  # slow clients are cut
    server.run(sockets=[listener])


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _token(host: str, token_env: str | None) -> tuple[str, bool]:
    """The login token, and whether it was drawn here: from ``token_env``, else (on a
    loopback address only) a random one, since other users of this machine reach loopback
    too."""
    if token_env is None:
        if not _loopback(host):
            raise fail(f"--host {host} lets other machines reach the inbox: give a login token "
                       "with --token-env NAME (an environment variable holding at least 16 "
                       "characters)")
        return secrets.token_urlsafe(24), True
    from miniagent.ui.security import MIN_TOKEN_CHARS

    token = os.environ.get(token_env)
    if not token:
        raise fail(f"--token-env {token_env}: the environment variable {token_env} is not set")
    if len(token) < MIN_TOKEN_CHARS:
        raise fail(f"--token-env {token_env}: the token has {len(token)} characters; give at "
                   f"least {MIN_TOKEN_CHARS}")
    return token, False


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound here so a busy port is one clear line (and port 0 tells
    which port it got)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host.strip("[]"), port))
    except OSError as exc:
        listener.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    listener.listen(128)
    listener.setblocking(False)
    return listener


def _agent_for(session: AgentSession, sessions: SQLiteStore) -> Agent:
    """The agent that runs ``session`` on: what it recorded, as ``sessions resume`` rebuilds
    it (a session that recorded no model server is resumed from the command line)."""
    from miniagent.cli.build import RunConfig, build_agent

    if RunConfig.forged(session.metadata):
        raise ConfigError(f"session {session.id} carries a command-line record that "
                          "miniagent's command line did not write (no valid seal; e.g. given "
                          "through run(metadata=...)): the inbox imports and connects nothing "
                          "from it; resume it with: miniagent sessions resume "
                          f"{session.id} --base-url URL --tools FILE")
    config = RunConfig.recorded(session.metadata)
    if not config.base_url:
        raise ConfigError(f"session {session.id} recorded no model server (it ran on the "
                          "embedded model, or from Python); resume it with: miniagent "
                          f"sessions resume {session.id}")
    return build_agent(config, sessions, api_key=None, interactive=False)


def _runs_with(session: AgentSession) -> str:
    """What a session goes on with in this inbox: the model server and tools it recorded."""
    from miniagent.cli.build import RunConfig

    if RunConfig.forged(session.metadata):
        return ("nothing: its command-line record was not written by miniagent's command "
                "line, so it is not used (resume it from the command line)")
    config = RunConfig.recorded(session.metadata)
    if not config.base_url:
        return "nothing here (no model server recorded: resume it from the command line)"
    parts = [f"model server {config.base_url}" + (f" ({config.model})" if config.model else ""),
             "tools: " + (", ".join(config.tools) or "none")]
    parts += [f"MCP: {line}" for line in [*config.mcp, *config.mcp_urls]]
    return "; ".join(parts)

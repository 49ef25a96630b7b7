"""The CLI on a Temporal cluster: `miniagent worker`, `run --temporal`, `sessions ... --temporal`.

Every command here ends through :func:`exit_now`: the Temporal SDK sometimes aborts at
interpreter exit after a clean finish (sdk-python#300), so output is flushed and the process
leaves with ``os._exit``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from miniagent.cli.build import RunConfig, build_model
from miniagent.cli.common import EXIT_CODES, cli_errors, echo_json
from miniagent.cli.display import terminal
from miniagent.cli.mcp_cmd import (
    McpApproveOption,
    McpHeaderOption,
    McpOption,
    McpUrlOption,
    mcp_servers,
    parse_headers,
)
from miniagent.cli.safe_text import markup, visible
from miniagent.errors import ConfigError
from miniagent.types import Step

T = TypeVar("T")

TemporalOption = Annotated[str | None, typer.Option(
    "--temporal", help="Temporal frontend HOST:PORT: work with the sessions there instead of "
    "the SQLite store.")]
TaskQueueOption = Annotated[str, typer.Option(
    "--task-queue", help="The Temporal task queue the workers serve.")]
POLL_SECONDS = 0.3


def exit_now(code: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@contextmanager
def leaving() -> Iterator[None]:
    """Turn typer's exits (and our one-line errors) into :func:`exit_now`."""
    code = 0
    try:
        with cli_errors():
            yield
    except typer.Exit as exc:
        code = exc.exit_code
    except KeyboardInterrupt:
        typer.echo("miniagent: interrupted (the session goes on on the cluster)", err=True)
        code = 130
    exit_now(code)


def _run(work: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(_call(work))


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


async def _sessions(address: str, task_queue: str = "miniagent") -> Any:
    from miniagent.durable import TemporalSessions, connect

    return TemporalSessions(await connect(address), task_queue)


# -- miniagent worker ---------------------------------------------------------------------

def worker(
    temporal: Annotated[str, typer.Option("--temporal", help="Temporal frontend HOST:PORT.")],
    task_queue: TaskQueueOption = "miniagent",
    tools: Annotated[list[str] | None, typer.Option("--tools", help="A Python file or module whose @tool functions are served, or 'builtin'. Repeatable.")] = None,  # noqa: E501
    workspace: Annotated[Path, typer.Option(help="Root the built-in file tools are confined to.")] = Path("."),  # noqa: E501
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL of the model [env: MINIAGENT_BASE_URL, OPENAI_BASE_URL]")] = None,  # noqa: E501
    model: Annotated[str | None, typer.Option(help="Model name sent to the server [env: MINIAGENT_MODEL]")] = None,  # noqa: E501
    api_key: Annotated[str | None, typer.Option(help="API key [env: MINIAGENT_API_KEY, OPENAI_API_KEY]")] = None,  # noqa: E501
    mode: Annotated[str, typer.Option(help="react, native or auto")] = "auto",
    request_timeout: Annotated[float, typer.Option(help="Timeout of one model request, seconds.")] = 120.0,  # noqa: E501
    mcp: McpOption = None,
    mcp_url: McpUrlOption = None,
    mcp_header: McpHeaderOption = None,
    mcp_approve: McpApproveOption = None,
) -> None:
    """Serve sessions of TASK_QUEUE on a Temporal cluster: model calls and tool calls run here."""
    from miniagent.cli.build import env
    from miniagent.cli.loading import load_tools

    with leaving():
        if mode not in ("react", "native", "auto"):
            raise ConfigError(f"--mode must be react, native or auto, got {mode!r}")
        config = RunConfig(base_url=base_url or env("MINIAGENT_BASE_URL", "OPENAI_BASE_URL"),
                           model=model or env("MINIAGENT_MODEL"), mode=mode,
                           request_timeout=request_timeout)
        sources: list[Any] = [load_tools([str(Path(t).resolve()) if t.endswith(".py") else t
                                          for t in tools or []], workspace.resolve())]
        sources += mcp_servers(list(mcp or []), list(mcp_url or []),  # MCP servers too
                               headers=parse_headers(mcp_header), approve=list(mcp_approve or []))
        llm = build_model(config, api_key)
        _run(lambda: _serve(temporal, task_queue, llm, sources))


async def _serve(address: str, task_queue: str, llm: Any, sources: list[Any]) -> None:
    from miniagent.durable import connect, session_worker

    client = await connect(address)
    serving = await session_worker(client, task_queue=task_queue, model=llm, sources=sources)
    listed = [await source.list_tools() for source in sources]
    names = ", ".join(t.name for tools in listed for t in tools) or "none"
    typer.echo(visible(f"miniagent worker: serving task queue {task_queue} at {address} "
                       f"(tools: {names}); Ctrl-C stops"), err=True)
    try:
        await serving.run()
    finally:  # MCP server processes end with the worker
        for source in sources:
            await source.aclose()


# -- miniagent run --temporal -------------------------------------------------------------

def run_remote(question: str, config: RunConfig, address: str, task_queue: str, *,
               as_json: bool, detach: bool) -> NoReturn:
    """Start a session on the cluster and follow its trace until it ends (or, with
    ``detach``, until it waits for a person)."""
    from miniagent.durable import AgentSettings
    from miniagent.runtime.compress import Compression

    for given, flag in ((config.tools, "--tools"), (config.mcp or config.mcp_urls, "--mcp")):
        if given:
            typer.echo(f"miniagent: warning: {flag} is ignored with --temporal: the workers' "
                       f"tools are used (miniagent worker {flag} ...)", err=True)
    if config.stream:
        typer.echo("miniagent: warning: --stream is ignored with --temporal: the workers' model "
                   "settings are used", err=True)
    with leaving():
        compression = None if config.compress_at is None else Compression.of(
            config.compress_at, keep_last=config.keep_last, mode=config.compress)
        settings = AgentSettings(
            tool_mode=None if config.mode == "auto" else config.mode,  # type: ignore[arg-type]
            max_steps=config.max_steps, timeout=config.timeout, grammar=config.grammar,
            max_tokens=config.max_tokens or 1024, tool_selection=config.max_tools,
            compression=compression, tool_choice=config.tool_choice)
        code = _run(lambda: _follow(question, settings, address, task_queue,
                                    as_json=as_json, detach=detach))
        raise typer.Exit(code)


async def _follow(question: str, settings: Any, address: str, task_queue: str, *,
                  as_json: bool, detach: bool) -> int:
    from miniagent.cli.display import result_to_json

    sessions = await _sessions(address, task_queue)
    session_id = await sessions.start(question, settings)
    console = terminal()
    if not as_json:
        console.print(f"[dim]session {markup(session_id)} on {markup(address)} (task queue "
                      f"{markup(task_queue)})[/dim]")
    shown: dict[int, set[Any]] = {}
    asked: set[str] = set()
    while True:
        progress = await sessions.progress(session_id, max(1, max(shown, default=1)))
        view = progress.view
        if not as_json:
            show_steps(console, progress.steps, shown)
            _ask(console, view, address, asked)
        if view.status == "awaiting_approval" and detach:
            if as_json:
                echo_json({"session_id": session_id, "status": view.status,
                           "pending": [p.__dict__ for p in view.pending]})
            return EXIT_CODES["awaiting_approval"]
        if view.status != "running" and view.status != "awaiting_approval":
            break
        await asyncio.sleep(POLL_SECONDS)
    result = await sessions.result(session_id)
    if as_json:
        echo_json(result_to_json(result))
    else:
        style = "green" if result.status == "completed" else "red"
        console.print(f"[bold {style}]{markup(result.status, 40)}[/bold {style}]: "
                      f"{markup(result.reason)}")
    return EXIT_CODES.get(result.status, 1)


def _ask(console: Console, view: Any, address: str, asked: set[str]) -> None:
    for item in view.pending:
        if item.call_id in asked:
            continue
        asked.add(item.call_id)
        args = json.dumps(item.arguments, ensure_ascii=False)
        console.print(f"[bold magenta]Approval needed[/bold magenta]: {markup(item.tool, 200)} "
                      f"{markup(args, 2000)} [dim](call {markup(item.call_id, 100)})[/dim]\n"
                      f"  approve: miniagent sessions approve {markup(view.session_id)} "
                      f"{markup(item.call_id, 100)} --temporal {markup(address)}\n"
                      f"  deny:    miniagent sessions deny {markup(view.session_id)} "
                      f"{markup(item.call_id, 100)} --temporal {markup(address)}")


def show_steps(console: Console, steps: list[Step], shown: dict[int, set[Any]]) -> None:
    """Print what is new in ``steps`` (``shown`` remembers what was printed)."""
    for step in steps:
        seen = shown.setdefault(step.index, set())
        if "head" not in seen:
            seen.add("head")
            console.rule(f"step {step.index}", style="dim")
            if step.thought:
                console.print(f"[italic cyan]Thought:[/italic cyan] {markup(step.thought)}")
        for record in step.calls:
            if ("call", record.call.id) not in seen:
                seen.add(("call", record.call.id))
                args = json.dumps(record.call.arguments, ensure_ascii=False)
                console.print(f"[bold yellow]Action[/bold yellow] "
                              f"{markup(record.call.name, 200)} {markup(args)}")
            if record.observation is not None and ("obs", record.call.id) not in seen:
                seen.add(("obs", record.call.id))
                style = "red" if record.observation.is_error else "green"
                console.print(f"[{style}]Observation:[/{style}] "
                              f"{markup(record.observation.output)}")
        if step.error and "error" not in seen:
            seen.add("error")
            console.print(f"[red]Unparseable output:[/red] {markup(step.error)}")
        if step.final_answer is not None and "final" not in seen:
            seen.add("final")
            console.print(f"[bold green]Final Answer:[/bold green] {markup(step.final_answer)}")


# -- miniagent sessions ... --temporal ------------------------------------------------------

def list_remote(address: str, limit: int, as_json: bool) -> NoReturn:
    from rich.table import Table

    with leaving():
        rows = _run(lambda: _list(address, limit))
        if as_json:
            echo_json(rows)
        else:
            table = Table("id", "status", "started", "question")
            for row in rows:
                table.add_row(markup(row["session_id"], 40), markup(row["status"], 40),
                              time.ctime(row["started_at"]), markup(row["question"][:80]))
            terminal().print(table)

    exit_now(0)  # not reached: leaving() exits

async def _list(address: str, limit: int) -> list[dict[str, Any]]:
    sessions = await _sessions(address)
    rows: list[dict[str, Any]] = await sessions.list(limit)
    return rows


def show_remote(address: str, session_id: str, as_json: bool) -> NoReturn:
    from miniagent.cli.sessions import _print_session

    with leaving():
        session = _run(lambda: _session(address, session_id))
        if as_json:
            echo_json(session.to_dict())
        else:
            _print_session(terminal(), session)

    exit_now(0)  # not reached: leaving() exits

async def _session(address: str, session_id: str) -> Any:
    return await (await _sessions(address)).session(session_id)


def decide_remote(address: str, session_id: str, call_id: str | None, approved: bool,
                  reason: str | None) -> NoReturn:
    with leaving():
        decided = _run(lambda: _decide(address, session_id, call_id, approved, reason))
        state = "approved" if approved else "denied"
        typer.echo(visible(f"{state} {', '.join(decided)} in session {session_id}; it goes on "
                           "on the cluster"))

    exit_now(0)  # not reached: leaving() exits

async def _decide(address: str, session_id: str, call_id: str | None, approved: bool,
                  reason: str | None) -> list[str]:
    decided: list[str] = await (await _sessions(address)).decide(session_id, approved, call_id,
                                                                 reason)
    return decided


def cancel_remote(address: str, session_id: str) -> NoReturn:
    with leaving():
        _run(lambda: _cancel(address, session_id))
        typer.echo(visible(f"cancelling session {session_id} on the cluster"))

    exit_now(0)  # not reached: leaving() exits

async def _cancel(address: str, session_id: str) -> None:
    await (await _sessions(address)).cancel(session_id)

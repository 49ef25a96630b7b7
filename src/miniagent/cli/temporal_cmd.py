"""The CLI on a Temporal cluster: `miniagent worker`, `run --temporal`, `sessions ... --temporal`.

Every command here ends through :func:`exit_now`: the Temporal SDK sometimes aborts at
interpreter exit after a clean finish (sdk-python#300), so output is flushed and the process
leaves with ``os._exit``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from miniagent._internal.aio import run_coroutine
from miniagent.cli.build import (
    ModelConcurrencyOption,
    RequestsPerMinuteOption,
    RunConfig,
    TokensPerMinuteOption,
    build_model,
)
from miniagent.cli.common import (
    SessionTracker,
    asks_in_terminal,
    cli_errors,
    echo_json,
    finish,
    show_progress,
)
from miniagent.cli.display import terminal
from miniagent.cli.mcp_cmd import (
    McpApproveOption,
    McpHeaderOption,
    McpOption,
    McpUrlOption,
    mcp_servers,
    parse_headers,
)
from miniagent.cli.memory_cmd import MemoryFileOption, MemoryNamespaceOption
from miniagent.cli.observing import (
    MetricsOption,
    WorkerOtlpOption,
    observing,
    otlp_meters,
    serving_metrics,
)
from miniagent.cli.safe_text import markup, visible
from miniagent.core.errors import ConfigError
from miniagent.core.types import RunResult

T = TypeVar("T")

TemporalOption = Annotated[str | None, typer.Option(
    "--temporal", help="Temporal frontend HOST:PORT: work with the sessions there instead of "
    "the SQLite store.")]
TaskQueueOption = Annotated[str, typer.Option(
    "--task-queue", help="The Temporal task queue the workers serve.")]

STOP_GRACE = 5.0
"""Seconds a stopping worker gives its shutdown (its calls in flight cancelled and reported,
the server told it leaves) before it leaves all the same: a server that did not answer held
it 30 s per request. Left so, it is a worker that died: the cluster gives its calls to
another worker after their heartbeat timeout."""


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
        typer.echo("miniagent: interrupted (the session continues on the cluster)", err=True)
        code = 130
    exit_now(code)


def _run(work: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(_call(work))


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


async def _sessions(address: str, task_queue: str = "miniagent") -> Any:
    from miniagent.temporal import TemporalSessions, connect

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
    metrics: MetricsOption = None,
    otlp: WorkerOtlpOption = None,
    memory: MemoryFileOption = None,
    memory_namespace: MemoryNamespaceOption = "default",
    max_concurrent_activities: Annotated[int | None, typer.Option(min=1, help="At most this many model calls and tool calls at once in this worker (Temporal's max_concurrent_activities) [default: Temporal's, 100].")] = None,  # noqa: E501
    task_queue_activities_per_second: Annotated[float | None, typer.Option(min=0.001, help="At most this many activities a second started on the whole task queue, by all its workers (Temporal's max_task_queue_activities_per_second; the server enforces it).")] = None,  # noqa: E501
    model_concurrency: ModelConcurrencyOption = None,
    requests_per_minute: RequestsPerMinuteOption = None,
    tokens_per_minute: TokensPerMinuteOption = None,
) -> None:
    """Serve sessions of TASK_QUEUE on a Temporal cluster: model calls and tool calls run here.

    With --metrics, the model calls and tool calls made here are served for Prometheus; with
    --otlp, sent to an OpenTelemetry collector; with --memory, the memory tools of agents that
    run with --memory (the same file). A tool's max_concurrency and the model endpoint's limits
    hold within this worker process.
    """
    from miniagent.cli.build import env
    from miniagent.cli.loading import load_tools
    from miniagent.observe.redact import model_secrets

    with leaving():
        if mode not in ("react", "native", "auto"):
            raise ConfigError(f"--mode must be react, native or auto, got {mode!r}")
        config = RunConfig(base_url=base_url or env("MINIAGENT_BASE_URL", "OPENAI_BASE_URL"),
                           model=model or env("MINIAGENT_MODEL"), mode=mode,
                           request_timeout=request_timeout, model_concurrency=model_concurrency,
                           requests_per_minute=requests_per_minute,
                           tokens_per_minute=tokens_per_minute)
        sources: list[Any] = [load_tools([str(Path(t).resolve()) if t.endswith(".py") else t
                                          for t in tools or []], workspace.resolve())]
        sources += mcp_servers(list(mcp or []), list(mcp_url or []),  # MCP servers too
                               headers=parse_headers(mcp_header), approve=list(mcp_approve or []))
        llm = build_model(config, api_key)
        if memory is not None:  # the model's API key is never stored in it
            sources.append(_memory_source(memory, memory_namespace, model_secrets(llm)))
        options = {name: value for name, value in (
            ("max_concurrent_activities", max_concurrent_activities),
            ("max_task_queue_activities_per_second", task_queue_activities_per_second))
            if value is not None}
        meter_provider = otlp_meters(otlp)
        try:
            with serving_metrics(llm, metrics, meter_provider) as counting:
                run_coroutine(_serve(temporal, task_queue, llm, sources, counting, options))
        finally:
            if meter_provider is not None:
                meter_provider.shutdown()  # sends the last figures


def _memory_source(path: Path, namespace: str, secrets: list[str]) -> Any:
    from miniagent.core.tools.registry import ToolRegistry
    from miniagent.memory import Memory, memory_tools

    return ToolRegistry(memory_tools(Memory(path.resolve()), namespace, secrets=secrets))


async def _serve(address: str, task_queue: str, llm: Any, sources: list[Any],
                 metrics: Any = None, options: dict[str, Any] | None = None) -> None:
    from miniagent.cli.warming import shown
    from miniagent.temporal import connect, session_worker
    from miniagent.temporal.worker import warm_served

    client = await connect(address)
    await shown(lambda: warm_served(sources, llm))  # before polling, with a status line
    serving = await session_worker(client, task_queue=task_queue, model=llm, sources=sources,
                                   metrics=metrics, warm_up=False, **(options or {}))
    listed = [await source.list_tools() for source in sources]
    names = ", ".join(t.name for tools in listed for t in tools) or "none"
    typer.echo(visible(f"miniagent worker: serving task queue {task_queue} at {address} "
                       f"(tools: {names}); Ctrl-C stops"), err=True)
    try:
        await _run_until_cancelled(serving)
    finally:  # MCP server processes end with the worker
        for source in sources:
            await source.aclose()


async def _run_until_cancelled(serving: Any) -> None:
    """Run the worker; once cancelled (Ctrl-C), give its shutdown :data:`STOP_GRACE`
    seconds, then leave all the same."""
    running = asyncio.ensure_future(serving.run())
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        running.cancel()  # its shutdown cancels the calls in flight (a sync tool's thread
        # cannot be stopped: it ends with the process)
        if not (await asyncio.wait({running}, timeout=STOP_GRACE))[0]:
            typer.echo(f"miniagent worker: the shutdown did not end within {STOP_GRACE:g} s "
                       "(the cluster does not answer); leaving without it", err=True)
        raise


# -- miniagent run --temporal, sessions resume --temporal ---------------------------------

def run_remote(question: str, config: RunConfig, address: str, task_queue: str, *,
               as_json: bool, detach: bool, verbose: bool, observe: dict[str, Any],
               continue_id: str | None = None) -> NoReturn:
    """``miniagent run`` on the cluster: the same agent, display, trace and result as in
    process; the model and tools are the workers'. With ``continue_id``, the next turn of
    that session."""
    for given, flag in ((config.tools, "--tools"), (config.mcp or config.mcp_urls, "--mcp")):
        if given:
            typer.echo(f"miniagent: warning: {flag} is ignored with --temporal: the workers' "
                       f"tools are used (miniagent worker {flag} ...)", err=True)
    limits = (config.model_concurrency, config.requests_per_minute, config.tokens_per_minute)
    for ignored, what in ((config.stream, "--stream"), (any(limits), "the model's limits")):
        if ignored:
            typer.echo(f"miniagent: warning: {what} is ignored with --temporal: the workers' "
                       "model settings are used", err=True)
    interactive = asks_in_terminal(detach=detach, as_json=as_json)
    with leaving():
        result = _run(lambda: _remote(address, task_queue, config, interactive, as_json,
                                      verbose, observe,
                                      lambda agent, tracker: _ask(
                                          agent, question, config, tracker, continue_id)))
        finish(result, as_json=as_json, temporal=address)
    exit_now(0)  # not reached: leaving() exits


def resume_remote(session_id: str, address: str, task_queue: str, *, as_json: bool,
                  detach: bool, verbose: bool, observe: dict[str, Any]) -> NoReturn:
    """``sessions resume --temporal``: follow the session until it ends or waits again."""
    interactive = asks_in_terminal(detach=detach, as_json=as_json)
    with leaving():
        result = _run(lambda: _remote(address, task_queue, RunConfig(), interactive, as_json,
                                      verbose, observe,
                                      lambda agent, tracker: agent.aresume(
                                          session_id, on_event=tracker)))
        finish(result, as_json=as_json, temporal=address)
    exit_now(0)  # not reached: leaving() exits


async def _ask(agent: Any, question: str, config: RunConfig, tracker: SessionTracker,
               continue_id: str | None) -> RunResult:
    if continue_id is not None:
        await agent.asession(continue_id)  # SessionNotFound: --continue names one that exists
    return await agent.arun(question, metadata=config.metadata(), on_event=tracker,
                            session_id=continue_id)


async def _remote(address: str, task_queue: str, config: RunConfig, interactive: bool,
                  as_json: bool, verbose: bool, observe: dict[str, Any],
                  work: Callable[[Any, SessionTracker], Awaitable[RunResult]]) -> RunResult:
    from miniagent.cli.build import temporal_agent
    from miniagent.temporal import connect

    agent = temporal_agent(config, await connect(address), task_queue, interactive=interactive)
    show_progress(agent, as_json=as_json, verbose=verbose)
    tracker = SessionTracker()
    with observing(agent, **observe):
        result = await work(agent, tracker)
    if not as_json and tracker.session_id:
        terminal().print(f"[dim]session {markup(tracker.session_id)} on {markup(address)} "
                         f"(task queue {markup(task_queue)})[/dim]")
    return result


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
        typer.echo(visible(f"{state} {', '.join(decided)} in session {session_id}; it "
                           "continues on the cluster (follow it: miniagent sessions resume "
                           f"{session_id} --temporal {address})"))

    exit_now(0)  # not reached: leaving() exits

async def _decide(address: str, session_id: str, call_id: str | None, approved: bool,
                  reason: str | None) -> list[str]:
    decided: list[str] = await (await _sessions(address)).decide(session_id, approved, call_id,
                                                                 reason)
    return decided


def cancel_remote(address: str, session_id: str, reason: str) -> NoReturn:
    with leaving():
        how = _run(lambda: _cancel(address, session_id, reason))
        typer.echo(visible(f"cancelled session {session_id} on the cluster" if how == "cancelling"
                           else f"terminated session {session_id}: no worker polls its task "
                           "queue, so nothing could record the cancellation"))

    exit_now(0)  # not reached: leaving() exits

async def _cancel(address: str, session_id: str, reason: str) -> str:
    how: str = await (await _sessions(address)).cancel(session_id, reason)
    return how

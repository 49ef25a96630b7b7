"""`miniagent worker` (serve a Temporal task queue), and the ``--temporal`` options of the
commands that work with a cluster's sessions (:mod:`miniagent.cli.temporal_backend`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from miniagent._internal.aio import run_coroutine
from miniagent.cli.build import (
    ModelConcurrencyOption,
    RequestsPerMinuteOption,
    RunConfig,
    TokensPerMinuteOption,
    build_model,
)
from miniagent.cli.common import cli_errors
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
    otlp_meters,
    serving_metrics,
)
from miniagent.cli.safe_text import visible
from miniagent.cli.temporal_client import connect, on_the_cluster
from miniagent.core.errors import ConfigError

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
    from miniagent.core.trace.redact import model_secrets

    with cli_errors(), on_the_cluster():
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
    from miniagent.memory import Memory

    return Memory(path.resolve()).tool_source(namespace, secrets=secrets)


async def _serve(address: str, task_queue: str, llm: Any, sources: list[Any],
                 metrics: Any = None, options: dict[str, Any] | None = None) -> None:
    from miniagent.cli.warming import shown
    from miniagent.temporal import session_worker
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

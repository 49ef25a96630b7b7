"""The ``miniagent`` command line: run, tools, parse, sessions, trace, memory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from miniagent import defaults
from miniagent.cli.build import RunConfig, build_agent, env, open_store
from miniagent.cli.common import (
    JsonOption,
    Mode,
    SessionTracker,
    StoreOption,
    asks_in_terminal,
    cli_errors,
    echo_json,
    fail,
    finish,
    interrupted,
    positive_seconds,
    show_progress,
)
from miniagent.cli.eval_cmd import eval_command
from miniagent.cli.help import readable_help
from miniagent.cli.loading import load_tools
from miniagent.cli.local import model_app
from miniagent.cli.mcp_cmd import (
    McpApproveOption,
    McpHeaderOption,
    McpOption,
    McpUrlOption,
    header_secrets,
    mcp_serve,
    mcp_servers,
    parse_headers,
)
from miniagent.cli.memory_cmd import memory_app
from miniagent.cli.observing import (
    MetricsOption,
    OtlpContentOption,
    OtlpOption,
    TraceOption,
    observing,
)
from miniagent.cli.parse_cmd import parse_jsonl, parse_native_body, parse_react_text
from miniagent.cli.safe_text import tolerant_streams
from miniagent.cli.sessions import sessions_app
from miniagent.cli.temporal_cmd import TaskQueueOption, TemporalOption
from miniagent.cli.temporal_cmd import worker as worker_cmd
from miniagent.cli.trace_cmd import trace_app
from miniagent.errors import UserError
from miniagent.version import installed_version

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="miniagent: a small, transparent ReAct / tool-calling agent runtime.",
)
app.add_typer(sessions_app, name="sessions")
app.command("mcp-serve")(mcp_serve)
app.add_typer(trace_app, name="trace")
app.command("worker")(worker_cmd)
app.command("eval")(eval_command)
app.add_typer(model_app, name="model")
app.add_typer(memory_app, name="memory")


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"miniagent {installed_version()}")
        raise typer.Exit()


@app.callback()
def _every_command(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print miniagent's version and exit.")] = False,  # noqa: E501
) -> None:
    tolerant_streams()


@app.command()
def run(
    question: Annotated[str, typer.Argument(help="The question or task for the agent.")],
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 [env: MINIAGENT_BASE_URL, OPENAI_BASE_URL]")] = None,  # noqa: E501
    model: Annotated[str | None, typer.Option(help="Model name sent to the server [env: MINIAGENT_MODEL]")] = None,  # noqa: E501
    api_key: Annotated[str | None, typer.Option(help="API key [env: MINIAGENT_API_KEY, OPENAI_API_KEY]")] = None,  # noqa: E501
    mode: Annotated[Mode, typer.Option(help="react (text + stop words), native (tools field), hybrid (a Thought, then a native call) or auto")] = Mode.auto,  # noqa: E501
    tools: Annotated[list[str] | None, typer.Option("--tools", help="A Python file or module whose @tool functions are loaded, or 'builtin'. Repeatable.")] = None,  # noqa: E501
    workspace: Annotated[Path, typer.Option(help="Root the built-in file tools are confined to.")] = Path("."),  # noqa: E501
    max_steps: Annotated[int, typer.Option(min=1, help="Model calls allowed before giving up.")] = (
        defaults.MAX_STEPS),
    timeout: Annotated[float | None, typer.Option(callback=positive_seconds, help="Wall-clock limit for the run, seconds.")] = None,  # noqa: E501
    request_timeout: Annotated[float, typer.Option(callback=positive_seconds, help="Timeout of one model request, seconds.")] = 120.0,  # noqa: E501
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Tokens per model turn [default: 1024; 256 for the embedded model]")] = None,  # noqa: E501
    model_path: Annotated[str | None, typer.Option(help="GGUF file for the embedded model, used when no --base-url is set [env: MINIAGENT_MODEL_PATH]")] = None,  # noqa: E501
    grammar: Annotated[bool, typer.Option("--grammar/--no-grammar", help="Constrain ReAct output with a grammar where the backend supports it.")] = True,  # noqa: E501
    grammar_field: Annotated[str | None, typer.Option(help="Send the grammar to the server in this field: grammar (llama.cpp), guided_grammar or structured_outputs (vLLM).")] = None,  # noqa: E501
    max_tools: Annotated[int | None, typer.Option(min=1, help="Offer each model request only the K tools most relevant to the conversation (plus those already used).")] = None,  # noqa: E501
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream the server's answers: thought and answer are shown as they are written (--base-url servers).")] = False,  # noqa: E501
    tool_choice: Annotated[str | None, typer.Option(help="auto, required (call a tool before answering), none, or a tool's name [default: auto]")] = None,  # noqa: E501
    mcp: McpOption = None,
    mcp_url: McpUrlOption = None,
    mcp_header: McpHeaderOption = None,
    mcp_approve: McpApproveOption = None,
    store: StoreOption = None,
    detach: Annotated[bool, typer.Option("--detach", help="Never ask for approval here: leave the session waiting.")] = False,  # noqa: E501
    continue_id: Annotated[str | None, typer.Option("--continue", metavar="SESSION_ID", help="Ask QUESTION as the next turn of this session's conversation (its last turn must have ended).")] = None,  # noqa: E501
    as_json: JsonOption = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show raw model output too.")] = False,  # noqa: E501
    compress_at: Annotated[str | None, typer.Option(help="Summarise the oldest rounds once the history crosses this size: estimated tokens (8000) or characters (12000c).")] = None,  # noqa: E501
    keep_last: Annotated[int, typer.Option(min=1, help="Rounds kept whole by --compress-at.")] = 4,
    compress: Annotated[str, typer.Option(help="Who writes the summary: truncate (results cut to ~200 characters) or model.")] = "truncate",  # noqa: E501
    trace: TraceOption = None,
    otlp: OtlpOption = None,
    otlp_content: OtlpContentOption = False,
    metrics: MetricsOption = None,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "miniagent",
) -> None:
    """Answer QUESTION with an agent, showing each step as it happens."""
    config = RunConfig(
        base_url=base_url or env("MINIAGENT_BASE_URL", "OPENAI_BASE_URL"),
        model=model or env("MINIAGENT_MODEL"), mode=mode.value,
        tools=[_absolute(t) for t in tools or []], workspace=str(workspace.resolve()),
        max_steps=max_steps, timeout=timeout, request_timeout=request_timeout,
        max_tokens=max_tokens, model_path=model_path, grammar=grammar,
        grammar_field=grammar_field, compress_at=compress_at, keep_last=keep_last,
        compress=compress, stream=stream, tool_choice=tool_choice,
        mcp=list(mcp or []), mcp_urls=list(mcp_url or []),
        mcp_approve=list(mcp_approve or []),
        max_tools=max_tools,
    )
    if temporal:  # the model and tools are the workers'; this process follows the trace
        from miniagent.cli.temporal_cmd import run_remote

        run_remote(question, config, temporal, task_queue, as_json=as_json, detach=detach,
                   verbose=verbose, observe=dict(trace=trace, otlp=otlp,
                                                 otlp_content=otlp_content, metrics=metrics),
                   continue_id=continue_id)
    interactive = asks_in_terminal(detach=detach, as_json=as_json)
    tracker = SessionTracker()
    with cli_errors(verbose=verbose), interrupted(tracker, store):
        headers = parse_headers(mcp_header)
        agent = build_agent(config, open_store(store), api_key=api_key, interactive=interactive,
                            mcp_headers=headers, verbose=verbose)
        show_progress(agent, as_json=as_json, verbose=verbose)
        if continue_id is not None:
            agent.session(continue_id)  # SessionNotFound: --continue names one that exists
        with observing(agent, trace=trace, otlp=otlp, otlp_content=otlp_content,
                       secrets=header_secrets(headers), metrics=metrics):
            result = agent.run(question, metadata=config.metadata(), on_event=tracker,
                               session_id=continue_id)
    finish(result, as_json=as_json, store=store)


def _absolute(source: str) -> str:
    """Tool files are recorded with absolute paths so that resume works from anywhere."""
    path = Path(source)
    return str(path.resolve()) if source.endswith(".py") or path.is_file() else source


@app.command()
def demo(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show raw model output too.")] = False,  # noqa: E501
) -> None:
    """Watch the loop work with no model: a scripted model served over real local HTTP."""
    from miniagent.agent import Agent
    from miniagent.cli.demo import QUESTION, SCRIPT, demo_workspace
    from miniagent.cli.display import TraceDisplay
    from miniagent.models.openai_compat import OpenAICompatibleModel
    from miniagent.testing.stub_server import StubServer
    from miniagent.tools.builtin import builtin_tools

    display = TraceDisplay(verbose=verbose)
    display.console.print(
        "[dim]Demo: a scripted model is served by the bundled stub server on 127.0.0.1; the "
        "HTTP client, parser, tools and guards are real. For a real model: miniagent run "
        "--base-url URL --model NAME ...[/dim]"
    )
    with cli_errors(verbose=verbose), demo_workspace() as workspace, \
            StubServer(SCRIPT).run_in_thread() as server:
        llm = OpenAICompatibleModel(base_url=server.base_url, model="scripted-demo",
                                    tool_mode="react")
        agent = Agent(model=llm, tools=builtin_tools(workspace), max_steps=6, on_event=display)
        result = agent.run(QUESTION)
    raise typer.Exit(0 if result.status == "completed" else 1)


@app.command("tools")
def tools_cmd(
    source: Annotated[str | None, typer.Argument(help="A Python file, a module, or 'builtin'.")] = None,  # noqa: E501
    workspace: Annotated[Path, typer.Option(help="Root for the built-in file tools.")] = Path("."),
    mcp: McpOption = None,
    mcp_url: McpUrlOption = None,
    mcp_header: McpHeaderOption = None,
) -> None:
    """Print the JSON Schemas of the @tool functions in SOURCE and of MCP servers' tools."""
    if source is None and not (mcp or mcp_url):
        raise fail("name a tools file or module, or an MCP server with --mcp / --mcp-url")
    try:
        registry = load_tools([source] if source else [], workspace)
        servers = mcp_servers(list(mcp or []), list(mcp_url or []),
                              headers=parse_headers(mcp_header), approve=[])
        schemas = registry.openai_schemas() + _mcp_schemas(servers)
    except UserError as exc:
        raise fail(str(exc)) from None
    echo_json(schemas, indent=2)


def _mcp_schemas(servers: list[Any]) -> list[dict[str, Any]]:
    if not servers:
        return []
    import asyncio

    from miniagent.sync import run_coroutine
    from miniagent.tools.toolbox import Toolbox

    async def listed() -> list[dict[str, Any]]:
        try:
            return (await Toolbox.gather(servers)).openai_schemas()
        finally:
            await asyncio.gather(*(server.aclose() for server in servers),
                                 return_exceptions=True)

    return run_coroutine(listed())


@app.command()
def parse(
    native: Annotated[bool, typer.Option("--native", help="stdin is a /v1/chat/completions response body.")] = False,  # noqa: E501
    jsonl: Annotated[bool, typer.Option("--jsonl", help="One JSON object per line: {'text': ...} or {'response': ...}.")] = False,  # noqa: E501
) -> None:
    """Show how miniagent parses a raw model output read from stdin (one JSON object out).

    ReAct (default): {"kind", "tool_calls": [{"name", "arguments"}], "final_answer", "thought",
    "error"}. With --native: {"content", "tool_calls", "cached_tokens"}; arguments that cannot
    be parsed are {"_invalid": true}; a ReAct input that is not a JSON object is {"_input": value}.
    """
    # model output is UTF-8 whatever the terminal's locale; stray bytes stay visible
    data = sys.stdin.buffer.read().decode("utf-8", errors="surrogateescape")
    with cli_errors():  # what the parsers do not catch (input nested too deeply) is one line
        if jsonl:
            for line in parse_jsonl(data.splitlines(), native_default=native):
                echo_json(line)
            return
        out: dict[str, Any] = parse_native_body(data) if native else parse_react_text(data)
        echo_json(out)
    if out.get("error") and native:
        raise typer.Exit(1)


readable_help(app)  # after every command above is registered


def main() -> None:
    app()

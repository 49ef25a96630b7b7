"""The ``miniagent`` command line: run, tools, parse, sessions, trace, memory, model, ui."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from miniagent._internal.version import installed_version
from miniagent.cli import ui_cmd
from miniagent.cli.chat import chat
from miniagent.cli.chat_input import StoppableAnswers
from miniagent.cli.common import (
    JsonOption,
    SessionTracker,
    asks_in_terminal,
    cli_errors,
    echo_json,
    fail,
    finish,
    interrupted,
    show_progress,
)
from miniagent.cli.eval_cmd import eval_command
from miniagent.cli.help import EverydayFirst, readable_help
from miniagent.cli.loading import listed_schemas, load_tools
from miniagent.cli.mcp_cmd import (
    McpHeaderOption,
    McpOption,
    McpUrlOption,
    header_secrets,
    mcp_serve,
    mcp_servers,
    parse_headers,
)
from miniagent.cli.memory_cmd import memory_app
from miniagent.cli.model_cmd import model_app
from miniagent.cli.observing import observing
from miniagent.cli.parse_cmd import parse_jsonl, parse_native_body, parse_react_text
from miniagent.cli.run_options import RunOptions, with_output_schema, with_run_options
from miniagent.cli.safe_text import tolerant_streams
from miniagent.cli.session_backend import ResumeOptions
from miniagent.cli.sessions import sessions_app
from miniagent.cli.temporal_client import made_a_client
from miniagent.cli.temporal_cmd import worker as worker_cmd
from miniagent.cli.trace_cmd import trace_app
from miniagent.cli.warming import warm_then
from miniagent.core.errors import UserError

app = typer.Typer(
    cls=EverydayFirst, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="miniagent: a small, transparent ReAct / tool-calling agent runtime.",
)
app.add_typer(sessions_app, name="sessions")
app.command("mcp-serve")(mcp_serve)
app.add_typer(trace_app, name="trace")
app.command("worker")(worker_cmd)
app.command("eval")(eval_command)
app.add_typer(model_app, name="model")
app.add_typer(memory_app, name="memory")
app.command("ui")(ui_cmd.ui)


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
@with_run_options
def run(
    question: Annotated[str, typer.Argument(help="The question or task for the agent.")],
    detach: Annotated[bool, typer.Option("--detach", help="Never ask for approval here: leave the session waiting.")] = False,  # noqa: E501
    continue_id: Annotated[str | None, typer.Option("--continue", metavar="SESSION_ID", help="Ask QUESTION as the next turn of this session's conversation (its last turn must have ended).")] = None,  # noqa: E501
    as_json: JsonOption = False,
    output_schema: Annotated[Path | None, typer.Option("--output-schema", metavar="FILE.json", help="A JSON Schema file: the answer must be a JSON value that fits it (repaired by the model when it does not); the value is printed (under 'output' with --json).")] = None,  # noqa: E501
    *,
    options: RunOptions,
) -> None:
    """Answer QUESTION with an agent, showing each step as it happens."""
    config = with_output_schema(options.config(), output_schema)
    if options.temporal:  # the model and tools are the workers'; this process follows the trace
        from miniagent.cli.temporal_backend import TemporalBackend

        following = ResumeOptions(as_json=as_json, detach=detach, verbose=options.verbose,
                                  observe=options.observe())
        with cli_errors(verbose=options.verbose):
            result = TemporalBackend(options.temporal, options.task_queue).ask(
                question, config, following, continue_id)
        finish(result, as_json=as_json, temporal=options.temporal)
    interactive = asks_in_terminal(detach=detach, as_json=as_json)
    tracker = SessionTracker()
    with cli_errors(verbose=options.verbose), interrupted(tracker, options.store):
        agent, headers = options.agent(config, interactive=interactive)
        StoppableAnswers.for_approvals(agent)  # a decision made elsewhere ends its question
        show_progress(agent, as_json=as_json, verbose=options.verbose)
        if continue_id is not None:
            agent.session(continue_id)  # SessionNotFound: --continue names one that exists
        with observing(agent, **options.observe(), secrets=header_secrets(headers)):
            result = warm_then(agent, lambda: agent.arun(
                question, metadata=config.metadata(), on_event=tracker, session_id=continue_id))
    finish(result, as_json=as_json, store=options.store)


app.command("chat")(with_run_options(chat))


@app.command()
def demo(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show raw model output too.")] = False,  # noqa: E501
) -> None:
    """Watch the loop work with no model: a scripted model served over real local HTTP."""
    from miniagent.cli.demo import QUESTION, SCRIPT, demo_workspace
    from miniagent.cli.display import TraceDisplay
    from miniagent.core.agent import Agent
    from miniagent.core.models.openai_compat import OpenAICompatibleModel
    from miniagent.core.runtime.guards import Limits
    from miniagent.core.tools.builtin import builtin_tools
    from miniagent.testing.stub_server import StubServer

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
        agent = Agent(model=llm, tools=builtin_tools(workspace), limits=Limits(max_steps=6))
        result = agent.run(QUESTION, on_event=display)
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
        schemas = [item.openai_schema() for item in registry] + listed_schemas(servers)
    except UserError as exc:
        raise fail(str(exc)) from None
    echo_json(schemas, indent=2)


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
    """Run the command line: the one place the process exits.

    A command that connected to a Temporal cluster leaves with ``os._exit`` once its output
    is flushed (see :mod:`miniagent.cli.temporal_client`: the SDK may abort at interpreter
    exit); any other leaves as Python does.
    """
    code: str | int | None = 0
    try:
        app()
    except SystemExit as exc:
        if not made_a_client():
            raise
        code = exc.code
    if made_a_client():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 0 if code is None else 1)

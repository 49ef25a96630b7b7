"""`miniagent sessions ...`: list, show, approve, deny, resume, fork and cancel saved sessions.

Each command is written once, against :class:`~miniagent.cli.session_backend.SessionBackend`:
the sessions of a SQLite store, or with ``--temporal`` those of a Temporal cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from miniagent._internal.jsonscan import json_object
from miniagent.cli.common import (
    JsonOption,
    Mode,
    StoreOption,
    cli_errors,
    echo_json,
    fail,
    finish,
)
from miniagent.cli.display import terminal
from miniagent.cli.mcp_cmd import McpHeaderOption
from miniagent.cli.observing import (
    MetricsOption,
    OtlpContentOption,
    OtlpOption,
    TraceOption,
)
from miniagent.cli.safe_text import visible
from miniagent.cli.session_backend import ResumeOptions, SessionBackend
from miniagent.cli.session_commands import resume_command
from miniagent.cli.session_view import listing_table, print_session, session_json
from miniagent.cli.temporal_cmd import TaskQueueOption, TemporalOption

sessions_app = typer.Typer(no_args_is_help=True, help="Saved sessions: inspect, approve, resume.")

SessionId = Annotated[str, typer.Argument(
    help="The session id, or its first characters (at least 4) if no other id begins so; "
    "with --temporal, the whole id (see 'miniagent sessions list').")]
CallId = Annotated[str | None, typer.Argument(help="One call id; default: every waiting call.")]
Reason = Annotated[str | None, typer.Option("--reason", help="Why; the model is told.")]
Force = Annotated[bool, typer.Option(
    "--force", help="Even if another process seems to be running the session (you know it "
    "is not).")]


def backend(store: Path | None, temporal: str | None,
            task_queue: str = "miniagent") -> SessionBackend:
    """The sessions of the cluster at ``temporal`` if given, else of the store file."""
    if temporal:
        from miniagent.cli.temporal_backend import TemporalBackend

        return TemporalBackend(temporal, task_queue)
    from miniagent.cli.store_backend import StoreBackend

    return StoreBackend(store)


@sessions_app.command("list")
def list_sessions(
    store: StoreOption = None, as_json: JsonOption = False,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 50,
    temporal: TemporalOption = None,
) -> None:
    """Saved sessions, most recently updated first."""
    sessions = backend(store, temporal)
    with cli_errors():
        rows = sessions.recent(limit)
        if as_json:
            echo_json([row.to_json() for row in rows])
            return
        terminal().print(listing_table(rows, counts_steps=sessions.counts_steps))
        for row in rows:
            if row.interrupted:
                typer.echo(visible(f"{row.session_id} is interrupted: its process is gone. "
                                   f"Go on with: {resume_command(row.session_id, store)}"))


@sessions_app.command()
def show(session_id: SessionId, store: StoreOption = None, as_json: JsonOption = False,
         temporal: TemporalOption = None) -> None:
    """The whole trace of a session: steps, calls, observations, transitions."""
    with cli_errors(session_id):
        session = backend(store, temporal).load(session_id)
        if as_json:
            echo_json(session_json(session))
            return
        print_session(terminal(), session)


CallOption = Annotated[str | None, typer.Option(
    "--call", help="One call id (the same as giving it after the session id).")]
ArgumentsOption = Annotated[str | None, typer.Option(
    "--arguments", help="Approve the call with these arguments instead of the model's: a JSON "
    "object, checked against the tool's schema (the model is told).")]


def _one_call(positional: str | None, option: str | None) -> str | None:
    if positional and option and positional != option:
        raise fail(f"two calls named: {positional} and --call {option}; name one")
    return positional or option


def _edited(text: str | None) -> dict[str, Any] | None:
    """The ``--arguments`` JSON object (None when not given)."""
    if text is None:
        return None
    try:
        return json_object(text)
    except TypeError as exc:
        raise fail(f"--arguments must be a JSON object, not {exc}") from None
    except ValueError as exc:
        raise fail(f"--arguments is not valid JSON: {exc}") from None


def _decide(session_id: str, call_id: str | None, approved: bool, reason: str | None,
            sessions: SessionBackend, force: bool,
            arguments: dict[str, Any] | None = None) -> None:
    with cli_errors(session_id):
        decided = sessions.decide(session_id, call_id, approved, reason, force=force,
                                  arguments=arguments)
    state = "approved" if approved else "denied"
    edits = " with your arguments" if arguments is not None and approved else ""
    typer.echo(visible(f"{state} {', '.join(decided.calls)}{edits} in session "
                       f"{decided.session_id}; {decided.then}"))
    if decided.command is not None:
        typer.echo(f"  {visible(decided.command)}")  # alone, to copy whole


@sessions_app.command()
def approve(session_id: SessionId, call_id: CallId = None, reason: Reason = None,
            store: StoreOption = None, force: Force = False,
            temporal: TemporalOption = None, call: CallOption = None,
            arguments: ArgumentsOption = None) -> None:
    """Approve a waiting call (or all), maybe with edited arguments; then `resume` runs it."""
    _decide(session_id, _one_call(call_id, call), True, reason, backend(store, temporal), force,
            _edited(arguments))


@sessions_app.command()
def deny(session_id: SessionId, call_id: CallId = None, reason: Reason = None,
         store: StoreOption = None, force: Force = False,
         temporal: TemporalOption = None, call: CallOption = None) -> None:
    """Deny a waiting call (or all); on `resume` the model is told why."""
    _decide(session_id, _one_call(call_id, call), False, reason, backend(store, temporal),
            force)


@sessions_app.command()
def cancel(session_id: SessionId, reason: Reason = None, store: StoreOption = None,
           force: Force = False, temporal: TemporalOption = None) -> None:
    """End a session that is not running; it cannot be resumed afterwards."""
    with cli_errors(session_id):
        done = backend(store, temporal).cancel(
            session_id, reason or "cancelled from the command line", force=force)
    typer.echo(visible(done))


@sessions_app.command()
def fork(
    session_id: SessionId,
    at: Annotated[int, typer.Option("--at", metavar="K", help="How many of its steps the new "
                                    "session keeps (0: only its first question).")],
    store: StoreOption = None, as_json: JsonOption = False, temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "miniagent",
) -> None:
    """A new session whose history is the first K steps of this one; this one is unchanged.

    With --temporal, the new session's workflow starts at once on the task queue's workers.
    """
    with cli_errors(session_id):
        forked = backend(store, temporal, task_queue).fork(session_id, at)
    if as_json:
        echo_json(forked.to_json())
        return
    typer.echo(visible(f"forked session {forked.parent} at step {forked.step}: new session "
                       f"{forked.session_id} ({forked.status}); {forked.then}"))
    if forked.command is not None:
        typer.echo(f"  {visible(forked.command)}")  # alone, to copy whole


@sessions_app.command()
def resume(
    session_id: SessionId,
    base_url: Annotated[str | None, typer.Option(help="Default: what the session recorded.")] = None,  # noqa: E501
    model: Annotated[str | None, typer.Option(help="Default: what the session recorded.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Never recorded [env: MINIAGENT_API_KEY, OPENAI_API_KEY]")] = None,  # noqa: E501
    mode: Annotated[Mode | None, typer.Option(help="Default: what the session recorded.")] = None,
    tools: Annotated[list[str] | None, typer.Option("--tools", help="Default: recorded.")] = None,
    mcp_header: McpHeaderOption = None,
    store: StoreOption = None,
    detach: Annotated[bool, typer.Option("--detach", help="Never ask for approval here.")] = False,
    as_json: JsonOption = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    force: Force = False,
    trace: TraceOption = None,
    otlp: OtlpOption = None,
    otlp_content: OtlpContentOption = False,
    metrics: MetricsOption = None,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "miniagent",
) -> None:
    """Continue a session after approvals, a crash, a timeout or an error.

    MCP servers are the recorded ones; give their headers (tokens) again with --mcp-header.
    With --temporal, follow the session on the cluster until it ends or waits again.
    """
    sessions = backend(store, temporal, task_queue)
    options = ResumeOptions(
        as_json=as_json, detach=detach, verbose=verbose, force=force,
        observe=dict(trace=trace, otlp=otlp, otlp_content=otlp_content, metrics=metrics),
        base_url=base_url, model=model, api_key=api_key, mode=mode.value if mode else None,
        tools=tools, mcp_header=mcp_header)
    with cli_errors(session_id, verbose=verbose):
        result = sessions.resume(session_id, options)
    finish(result, as_json=as_json, store=sessions.store, temporal=sessions.temporal)

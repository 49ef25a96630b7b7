"""`miniagent sessions ...`: list, show, approve, deny, resume and cancel saved sessions."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from miniagent.cli.build import RunConfig, build_agent, open_store
from miniagent.cli.common import (
    JsonOption,
    Mode,
    StoreOption,
    asks_in_terminal,
    cli_errors,
    finish,
    show_progress,
)
from miniagent.session import AgentSession

sessions_app = typer.Typer(no_args_is_help=True, help="Saved sessions: inspect, approve, resume.")

SessionId = Annotated[str, typer.Argument(help="The session id (see 'miniagent sessions list').")]
CallId = Annotated[str | None, typer.Argument(help="One call id; default: every waiting call.")]
Reason = Annotated[str | None, typer.Option("--reason", help="Why; the model is told.")]


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


@sessions_app.command("list")
def list_sessions(store: StoreOption = None, as_json: JsonOption = False,
                  limit: Annotated[int, typer.Option(help="At most this many.")] = 50) -> None:
    """Saved sessions, most recently updated first."""
    with cli_errors():
        rows = open_store(store).list(limit)
    if as_json:
        typer.echo(json.dumps([
            {"session_id": r.session_id, "status": r.status, "steps": r.steps,
             "question": r.question, "updated_at": r.updated_at} for r in rows
        ], ensure_ascii=False))
        return
    table = Table("id", "status", "steps", "age", "question")
    now = time.time()
    for r in rows:
        table.add_row(r.session_id, r.status, str(r.steps), _age(now - r.updated_at),
                      escape(r.question[:80]))
    Console(highlight=False).print(table)


@sessions_app.command()
def show(session_id: SessionId, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """The whole trace of a session: steps, calls, observations, transitions."""
    with cli_errors(session_id):
        session = open_store(store).load(session_id)
        if as_json:
            typer.echo(json.dumps(session.to_dict(), ensure_ascii=False))
            return
        _print_session(Console(highlight=False), session)


def _print_session(console: Console, s: AgentSession) -> None:
    console.print(f"[bold]Session {s.id}[/bold]: {s.status} — {escape(s.reason)}")
    console.print(f"Question: {escape(s.question)}")
    console.print(f"[dim]{len(s.steps)} steps · {s.usage.total_tokens:,} tokens · "
                  f"{s.elapsed:.2f} s · created {time.ctime(s.created_at)}[/dim]")
    for step in s.steps:
        console.rule(f"step {step.index}", style="dim")
        if step.thought:
            console.print(f"[italic cyan]Thought:[/italic cyan] {escape(step.thought)}")
        for record in step.calls:
            args = json.dumps(record.call.arguments, ensure_ascii=False)
            note = f" — {escape(record.note)}" if record.note else ""
            console.print(f"[bold yellow]Action[/bold yellow] {escape(record.call.name)} "
                          f"{escape(args)} [dim]({record.call.id}: {record.state}{note})[/dim]")
            if record.observation is not None:
                style = "red" if record.observation.is_error else "green"
                console.print(f"[{style}]Observation:[/{style}] "
                              f"{escape(record.observation.output)}")
        if step.error:
            console.print(f"[red]Unparseable output:[/red] {escape(step.error)}")
        if step.final_answer is not None:
            console.print(f"[bold green]Final Answer:[/bold green] {escape(step.final_answer)}")
    console.rule("transitions", style="dim")
    for t in s.transitions:
        console.print(f"[dim]{time.ctime(t.at)}[/dim] {t.source} -> {t.target}: "
                      f"{escape(t.reason)}")


def _decide(session_id: str, call_id: str | None, approved: bool, reason: str | None,
            store: StoreOption) -> None:
    from miniagent.runtime.approvals import decide

    with cli_errors(session_id):
        session = open_store(store).update(
            session_id, lambda s: decide(s, call_id, approved, reason, at=time.time()))
    state = "approved" if approved else "denied"
    decided = [r.call.id for r in session.open_calls() if r.state == state]
    typer.echo(f"{state} {', '.join(decided)} in session {session_id}; continue with: "
               f"miniagent sessions resume {session_id}")


@sessions_app.command()
def approve(session_id: SessionId, call_id: CallId = None, reason: Reason = None,
            store: StoreOption = None) -> None:
    """Approve a waiting call (or all); then `resume` runs it."""
    _decide(session_id, call_id, True, reason, store)


@sessions_app.command()
def deny(session_id: SessionId, call_id: CallId = None, reason: Reason = None,
         store: StoreOption = None) -> None:
    """Deny a waiting call (or all); on `resume` the model is told why."""
    _decide(session_id, call_id, False, reason, store)


@sessions_app.command()
def cancel(session_id: SessionId, reason: Reason = None, store: StoreOption = None) -> None:
    """End a session that is not running; it cannot be resumed afterwards."""
    from miniagent.agent import cancel_session

    with cli_errors(session_id):
        cancel_session(open_store(store), session_id, reason or "cancelled from the command line")
    typer.echo(f"cancelled session {session_id}")


@sessions_app.command()
def resume(
    session_id: SessionId,
    base_url: Annotated[str | None, typer.Option(help="Default: what the session recorded.")] = None,  # noqa: E501
    model: Annotated[str | None, typer.Option(help="Default: what the session recorded.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Never recorded [env: MINIAGENT_API_KEY, OPENAI_API_KEY]")] = None,  # noqa: E501
    mode: Annotated[Mode | None, typer.Option(help="Default: what the session recorded.")] = None,
    tools: Annotated[list[str] | None, typer.Option("--tools", help="Default: recorded.")] = None,
    store: StoreOption = None,
    detach: Annotated[bool, typer.Option("--detach", help="Never ask for approval here.")] = False,
    as_json: JsonOption = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Continue a session after approvals, a crash, a timeout or an error."""
    with cli_errors(session_id, verbose=verbose):
        sessions = open_store(store)
        recorded = RunConfig.recorded(sessions.load(session_id).metadata)
        config = recorded.merged(base_url=base_url, model=model, tools=tools,
                                 mode=mode.value if mode else None)
        interactive = asks_in_terminal(detach=detach, as_json=as_json)
        agent = build_agent(config, sessions, api_key=api_key, interactive=interactive)
        show_progress(agent, as_json=as_json, verbose=verbose)
        result = agent.resume(session_id)
    finish(result, as_json=as_json, store=store)

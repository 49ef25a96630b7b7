"""`miniagent sessions ...`: list, show, approve, deny, resume and cancel saved sessions."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from miniagent._internal.wording import counted, token_count
from miniagent.cli.build import RunConfig, build_agent, open_store
from miniagent.cli.chat_input import StoppableAnswers
from miniagent.cli.common import (
    JsonOption,
    Mode,
    SessionTracker,
    StoreOption,
    asks_in_terminal,
    cli_errors,
    echo_json,
    finish,
    interrupted,
    resume_command,
    session_command,
    show_progress,
)
from miniagent.cli.display import terminal
from miniagent.cli.mcp_cmd import McpHeaderOption, header_secrets, parse_headers
from miniagent.cli.observing import (
    MetricsOption,
    OtlpContentOption,
    OtlpOption,
    TraceOption,
    observing,
)
from miniagent.cli.safe_text import markup, visible
from miniagent.cli.temporal_cmd import TaskQueueOption, TemporalOption
from miniagent.cli.warming import warm_then
from miniagent.core.errors import DecisionError, UserError
from miniagent.core.runtime import events as ev
from miniagent.core.session import FINAL, AgentSession
from miniagent.core.store.listing import SessionSummary
from miniagent.core.types import CallRecord

if TYPE_CHECKING:
    from miniagent.core.agent import Agent

sessions_app = typer.Typer(no_args_is_help=True, help="Saved sessions: inspect, approve, resume.")

SessionId = Annotated[str, typer.Argument(
    help="The session id, or its first characters (at least 4) if no other id begins so; "
    "with --temporal, the whole id (see 'miniagent sessions list').")]
CallId = Annotated[str | None, typer.Argument(help="One call id; default: every waiting call.")]
Reason = Annotated[str | None, typer.Option("--reason", help="Why; the model is told.")]
Force = Annotated[bool, typer.Option(
    "--force", help="Even if another process seems to be running the session (you know it "
    "is not).")]


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


@sessions_app.command("list")
def list_sessions(
    store: StoreOption = None, as_json: JsonOption = False,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 50,
    temporal: TemporalOption = None,
) -> None:
    """Saved sessions, most recently updated first."""
    if temporal:
        from miniagent.cli.temporal_cmd import list_remote

        list_remote(temporal, limit, as_json)
    with cli_errors():
        rows = open_store(store, readonly=True).list(limit)
    if as_json:
        echo_json([
            {"session_id": r.session_id, "status": r.status, "steps": r.steps,
             "question": r.question, "updated_at": r.updated_at} for r in rows
        ])
        return
    terminal().print(sessions_table(rows))


def sessions_table(rows: list[SessionSummary], turns: dict[str, str] | None = None) -> Table:
    """Sessions as ``sessions list`` shows them: id, status, steps, age, question; with
    ``turns`` (by session id), a turns column after the status."""
    table = Table("id", "status", *(["turns"] if turns is not None else []), "steps", "age",
                  "question")
    now = time.time()
    for r in rows:
        counted_turns = [turns.get(r.session_id, "?")] if turns is not None else []
        table.add_row(markup(r.session_id, 40), markup(r.status, 40), *counted_turns,
                      str(r.steps), _age(now - r.updated_at), markup(r.question[:80]))
    return table


@sessions_app.command()
def show(session_id: SessionId, store: StoreOption = None, as_json: JsonOption = False,
         temporal: TemporalOption = None) -> None:
    """The whole trace of a session: steps, calls, observations, transitions."""
    if temporal:
        from miniagent.cli.temporal_cmd import show_remote

        show_remote(temporal, session_id, as_json)
    with cli_errors(session_id):
        sessions = open_store(store, readonly=True)
        session = sessions.load(sessions.resolve(session_id))
        if as_json:
            echo_json(_session_json(session))
            return
        _print_session(terminal(), session)


def _session_json(session: AgentSession) -> dict[str, object]:
    """The saved form, with each call's ``outcome`` added: derived, not saved, so that a
    denied call (saved ``completed``, as it has its observation) reads as denied."""
    data = session.to_dict()
    for step, saved in zip(session.steps, data["steps"], strict=True):
        for record, call in zip(step.calls, saved["calls"], strict=True):
            call["outcome"] = record.outcome
    return data


def _call_state(record: CallRecord) -> str:
    """Where a call stands, in words: ``completed`` alone would hide that it never ran."""
    if record.outcome == "denied":
        return "denied, not run again" if record.interrupted else "denied, not run"
    if record.outcome == "not_run":
        return "answered without running"
    return record.state


def _show_decided(agent: Agent, session: AgentSession) -> None:
    """Once the resumed run's question is shown: what it does with the calls a person
    decided (the live trace shows only the calls that run)."""
    decided = [r for r in session.open_calls() if r.state in ("approved", "denied")]
    console = terminal()

    def on_start(event: ev.Event) -> None:
        if isinstance(event, ev.RunStarted) and event.session_id == session.id and decided:
            _print_decided(console, decided)
            decided.clear()  # once, whatever the run emits later

    agent.subscribe(on_start)


def _print_decided(console: Console, decided: list[CallRecord]) -> None:
    for record in decided:
        args = json.dumps(record.call.arguments, ensure_ascii=False)
        then = ("it runs now" if record.state == "approved"
                else "it is not run, and the model is told why")
        note = f" ({markup(record.note)})" if record.note else ""
        console.print(f"[bold yellow]{record.state.capitalize()}[/bold yellow]{note}: "
                      f"{markup(record.call.name, 200)} {markup(args, 300)} "
                      f"[dim]({markup(record.call.id, 100)})[/dim]; {then}")


def _print_session(console: Console, s: AgentSession) -> None:
    """Every text of a session file is printed through ``markup``: the file may be hostile."""
    console.print(f"[bold]Session {markup(s.id)}[/bold]: {markup(s.status, 40)} — "
                  f"{markup(s.reason)}")
    console.print(f"Question: {markup(s.question)}")
    turns = f"{counted(len(s.turns), 'turn')} · " if len(s.turns) > 1 else ""
    console.print(f"[dim]{turns}{counted(len(s.steps), 'step')} · "
                  f"{token_count(s.usage)} · "
                  f"{s.elapsed:.2f} s · created {time.ctime(s.created_at)}[/dim]")
    starts = {turn.first_step: (n, turn) for n, turn in enumerate(s.turns, 1) if n > 1}
    for position, step in enumerate(s.steps):
        if position in starts:
            number, turn = starts[position]
            console.rule(f"turn {number}", style="bold")
            console.print(f"Question: {markup(turn.question)}")
        console.rule(f"step {step.index}", style="dim")
        if step.thought:  # an unparsed reply's text is kept as its thought: say what it is
            label = ("[red]Unparsed reply:[/red]" if step.error
                     else "[italic cyan]Thought:[/italic cyan]")
            console.print(f"{label} {markup(step.thought)}")
        if step.offered_tools is not None:
            console.print(f"[dim]offered: {markup(', '.join(step.offered_tools))}[/dim]")
        for record in step.calls:
            args = json.dumps(record.call.arguments, ensure_ascii=False)
            note = f" — {markup(record.note)}" if record.note else ""
            console.print(f"[bold yellow]Action[/bold yellow] {markup(record.call.name, 200)} "
                          f"{markup(args)} [dim]({markup(record.call.id, 100)}: "
                          f"{markup(_call_state(record), 40)}{note})[/dim]")
            if record.observation is not None:
                style = "red" if record.observation.is_error else "green"
                console.print(f"[{style}]Observation:[/{style}] "
                              f"{markup(record.observation.output)}")
                sub = record.observation.sub_run
                if sub is not None:
                    console.print(f"[dim]sub-run {markup(sub.session_id, 200)}: "
                                  f"{markup(sub.status, 40)}, {counted(len(sub.steps), 'step')}, "
                                  f"{token_count(sub.usage)}[/dim]")
        if step.error:
            console.print(f"[red]Format error:[/red] {markup(step.error)}")
        if step.final_answer is not None:
            console.print(f"[bold green]Final Answer:[/bold green] {markup(step.final_answer)}")
    console.rule("transitions", style="dim")
    for t in s.transitions:
        console.print(f"[dim]{time.ctime(t.at)}[/dim] {markup(t.source, 40)} -> "
                      f"{markup(t.target, 40)}: {markup(t.reason)}")


_WHY_IT_ENDED = {
    "completed": "it has its final answer",
    "cancelled": "a cancelled session stays ended",
    "max_steps": "it used every step it was allowed; ask again with a higher --max-steps",
    "budget_exceeded": "it used its token budget; ask again with a larger one",
    "loop_detected": "it was stopped for repeating a call; ask again, perhaps otherwise",
}
"""Why a session that has ended cannot go on, and what a person can do instead."""


def _ended(session: AgentSession) -> str:
    return f"has ended ({session.status}: {session.reason})"


def _nothing_to_resume(session: AgentSession, *, as_json: bool, store: StoreOption) -> None:
    """Resuming a session that has ended: its result, and in words its status and why there
    is nothing to resume (instead of a silent exit)."""
    if not as_json:
        why = _WHY_IT_ENDED.get(session.status, "it cannot go on")
        typer.echo(visible(f"Session {session.id} {_ended(session)}; there is nothing to resume: "
                           f"{why}. See it with:"))
        typer.echo(visible(session_command("show", session.id, store)))
    finish(session.result(), as_json=as_json, store=store)


def _warn_forced(session_id: str, force: bool) -> None:
    if force:
        typer.echo(f"miniagent: warning: --force: another process may still be running session "
                   f"{session_id}; it is taken over anyway (that process stops at its next "
                   "checkpoint, but a tool call it is running may still finish)", err=True)


def _decide(session_id: str, call_id: str | None, approved: bool, reason: str | None,
            store: StoreOption, force: bool) -> None:
    from miniagent.core.runtime.calls import decide

    def change(session: AgentSession) -> None:
        _check_something_waits(session, "approve" if approved else "deny", store)
        decide(session, call_id, approved, reason, at=time.time())

    with cli_errors(session_id):
        sessions = open_store(store)
        session_id = sessions.resolve(session_id)
        _warn_forced(session_id, force)
        session = sessions.update(session_id, change, force=force)
        taken = sessions.awaits_decisions(session_id)
    state = "approved" if approved else "denied"
    decided = [r.call.id for r in session.open_calls() if r.state == state]
    if taken:  # e.g. a chat at its approval prompt: it goes on by itself
        typer.echo(visible(f"{state} {', '.join(decided)} in session {session_id}; the process "
                           "waiting for this decision goes on with it"))
        return
    typer.echo(visible(f"{state} {', '.join(decided)} in session {session_id}; continue with:"))
    typer.echo(f"  {visible(resume_command(session_id, store))}")  # alone, to copy whole


def _check_something_waits(session: AgentSession, verb: str, store: StoreOption) -> None:
    """A session with no call to decide: say its status, why, and what next.

    (``decide`` alone would report "no call None awaiting approval", or only the status.)
    """
    if session.status in FINAL:
        raise DecisionError(f"session {session.id} {_ended(session)}; there is nothing to {verb}")
    if session.status != "awaiting_approval":
        raise DecisionError(
            f"session {session.id} is not awaiting approval ({session.status}: "
            f"{session.reason}): no call waits for a decision; continue it with: "
            f"{resume_command(session.id, store)}")
    open_calls = session.open_calls()
    if any(r.state == "awaiting_approval" for r in open_calls):
        return
    decided = ", ".join(f"{r.call.id} {r.state}" for r in open_calls) or "none"
    raise DecisionError(f"session {session.id} has no call awaiting approval (decided: "
                        f"{decided}); continue with: {resume_command(session.id, store)}")


@sessions_app.command()
def approve(session_id: SessionId, call_id: CallId = None, reason: Reason = None,
            store: StoreOption = None, force: Force = False,
            temporal: TemporalOption = None) -> None:
    """Approve a waiting call (or all); then `resume` runs it."""
    if temporal:
        from miniagent.cli.temporal_cmd import decide_remote

        decide_remote(temporal, session_id, call_id, True, reason)
    _decide(session_id, call_id, True, reason, store, force)


@sessions_app.command()
def deny(session_id: SessionId, call_id: CallId = None, reason: Reason = None,
         store: StoreOption = None, force: Force = False,
         temporal: TemporalOption = None) -> None:
    """Deny a waiting call (or all); on `resume` the model is told why."""
    if temporal:
        from miniagent.cli.temporal_cmd import decide_remote

        decide_remote(temporal, session_id, call_id, False, reason)
    _decide(session_id, call_id, False, reason, store, force)


@sessions_app.command()
def cancel(session_id: SessionId, reason: Reason = None, store: StoreOption = None,
           force: Force = False, temporal: TemporalOption = None) -> None:
    """End a session that is not running; it cannot be resumed afterwards."""
    if temporal:
        from miniagent.cli.temporal_cmd import cancel_remote

        cancel_remote(temporal, session_id, reason or "cancelled from the command line")
    from miniagent.core.agent import cancel_session

    with cli_errors(session_id):
        sessions = open_store(store)
        session_id = sessions.resolve(session_id)
        _warn_forced(session_id, force)
        ended = sessions.load(session_id)
        if ended.status in FINAL:  # the state machine's refusal reads as a bug
            raise UserError(f"session {session_id} {_ended(ended)}; there is nothing to cancel")
        cancel_session(sessions, session_id, reason or "cancelled from the command line",
                       force=force)
    typer.echo(visible(f"cancelled session {session_id}"))


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
    if temporal:
        from miniagent.cli.temporal_cmd import resume_remote

        resume_remote(session_id, temporal, task_queue, as_json=as_json, detach=detach,
                      verbose=verbose,
                      observe=dict(trace=trace, otlp=otlp, otlp_content=otlp_content,
                                   metrics=metrics))
    tracker = SessionTracker(session_id)
    with cli_errors(session_id, verbose=verbose), interrupted(tracker, store):
        sessions = open_store(store)
        session_id = tracker.session_id = sessions.resolve(session_id)
        _warn_forced(session_id, force)
        saved = sessions.load(session_id)
        if saved.status in FINAL:
            return _nothing_to_resume(saved, as_json=as_json, store=store)  # it exits
        if RunConfig.forged(saved.metadata):
            typer.echo(f"miniagent: warning: session {session_id} carries a command-line record "
                       "that miniagent's command line did not write (no valid seal): it is "
                       "ignored; give the model server and tools as options", err=True)
        recorded = RunConfig.recorded(saved.metadata)
        config = recorded.merged(base_url=base_url, model=model, tools=tools,
                                 mode=mode.value if mode else None)
        interactive = asks_in_terminal(detach=detach, as_json=as_json)
        headers = parse_headers(mcp_header)
        agent = build_agent(config, sessions, api_key=api_key, interactive=interactive,
                            mcp_headers=headers, verbose=verbose)
        StoppableAnswers.for_approvals(agent)  # a decision made elsewhere ends its question
        show_progress(agent, as_json=as_json, verbose=verbose)
        if not as_json:
            _show_decided(agent, saved)
        with observing(agent, trace=trace, otlp=otlp, otlp_content=otlp_content,
                       secrets=header_secrets(headers), metrics=metrics):
            result = warm_then(agent, lambda: agent.aresume(session_id, force=force))
    finish(result, as_json=as_json, store=store)

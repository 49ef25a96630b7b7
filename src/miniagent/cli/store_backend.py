"""Sessions in a SQLite store (``--store``): read and changed here, resumed in this process.

A session id may be given by its first characters. ``--force`` takes a session over from a
process that seems to run it (the lease); a decision waited for by another process (a chat at
its approval prompt) goes on there.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from miniagent.cli.build import RunConfig, build_agent, open_store
from miniagent.cli.chat_input import StoppableAnswers
from miniagent.cli.common import SessionTracker, asks_in_terminal, interrupted, show_progress
from miniagent.cli.display import terminal
from miniagent.cli.mcp_cmd import header_secrets, parse_headers
from miniagent.cli.observing import observing
from miniagent.cli.safe_text import markup, visible
from miniagent.cli.session_backend import Decided, Forked, Listed, ResumeOptions, SessionBackend
from miniagent.cli.session_commands import resume_command, session_command, where_options
from miniagent.cli.warming import warm_then
from miniagent.core.errors import DecisionError, UserError
from miniagent.core.runtime import events as ev
from miniagent.core.session import FINAL, TURN_ENDED, AgentSession, call_to_run
from miniagent.core.types import CallRecord, RunResult

if TYPE_CHECKING:
    from miniagent.core.agent import Agent
    from miniagent.core.store.sqlite import SQLiteStore

_WHY_IT_ENDED = {
    "completed": "it has its final answer",
    "cancelled": "a cancelled session stays ended",
    "max_steps": "it used every step it was allowed; ask again with a higher --max-steps",
    "budget_exceeded": "it used its token budget; ask again with a larger one",
    "loop_detected": "it was stopped for repeating a call; ask again, perhaps otherwise",
}
"""Why a session that has ended cannot go on, and what a person can do instead."""


class StoreBackend(SessionBackend):
    """The sessions of the store file ``store`` (None: MINIAGENT_STORE, else the default)."""

    def __init__(self, store: Path | None) -> None:
        self.store = store

    def recent(self, limit: int) -> list[Listed]:
        return [Listed(session_id=r.session_id, status=r.status, steps=r.steps,
                       question=r.question, updated_at=r.updated_at,
                       interrupted=r.interrupted or None)
                for r in open_store(self.store, readonly=True).list(limit)]

    def load(self, session_id: str) -> AgentSession:
        sessions = open_store(self.store, readonly=True)
        return sessions.load(sessions.resolve(session_id))

    def decide(self, session_id: str, call_id: str | None, approved: bool,
               reason: str | None, *, force: bool,
               arguments: dict[str, Any] | None = None) -> Decided:
        from miniagent.core.session import decide

        def change(session: AgentSession) -> None:
            _check_something_waits(session, "approve" if approved else "deny", self.store)
            decide(session, call_id, approved, reason, at=time.time(), arguments=arguments)

        sessions = open_store(self.store)
        session_id = sessions.resolve(session_id)
        _warn_forced(session_id, force)
        session = sessions.update(session_id, change, force=force)
        state = "approved" if approved else "denied"
        calls = [r.call.id for r in session.open_calls() if r.state == state]
        if sessions.awaits_decisions(session_id):  # e.g. a chat at its approval prompt
            return Decided(session_id=session_id, calls=calls,
                           then="the process waiting for this decision goes on with it")
        return Decided(session_id=session_id, calls=calls, then="continue with:",
                       command=resume_command(session_id, self.store))

    def cancel(self, session_id: str, reason: str, *, force: bool) -> str:
        from miniagent.core.agent import cancel_session

        sessions = open_store(self.store)
        session_id = sessions.resolve(session_id)
        _warn_forced(session_id, force)
        ended = sessions.load(session_id)
        if ended.status in FINAL:  # the state machine's refusal reads as a bug
            raise UserError(f"session {session_id} {_ended(ended)}; there is nothing to cancel")
        cancel_session(sessions, session_id, reason, force=force)
        return f"cancelled session {session_id}"

    def fork(self, session_id: str, at_step: int) -> Forked:
        """The fork saved in the same store; the parent is only read."""
        from miniagent.core.runtime.fork import fork_stored

        sessions = open_store(self.store)
        parent = sessions.resolve(session_id)
        child = fork_stored(sessions, parent, at_step)
        if child.status == "awaiting_approval":
            then, command = "decide on its waiting calls with:", session_command(
                "approve", child.id, self.store)
        elif child.status in TURN_ENDED and child.phase != "tools":
            then, command = "ask it a next question with:", shlex.join(
                ["miniagent", "run", "--continue", child.id, "QUESTION",
                 *where_options(self.store)])
        elif child.status in FINAL:
            then, command = "it has ended; see it with:", session_command(
                "show", child.id, self.store)
        else:
            then, command = "continue it with:", resume_command(child.id, self.store)
        return Forked(session_id=child.id, parent=parent, step=at_step, status=child.status,
                      then=then, command=command)

    def resume(self, session_id: str, options: ResumeOptions) -> RunResult:
        """Run the session on in this process with the model and tools it recorded (or those
        ``options`` give); one that has ended: its result, with why nothing was resumed."""
        tracker = SessionTracker(session_id)
        with interrupted(tracker, self.store):
            sessions = open_store(self.store)
            session_id = tracker.session_id = sessions.resolve(session_id)
            _warn_forced(session_id, options.force)
            saved = sessions.load(session_id)
            if saved.status in FINAL:
                if not options.as_json:
                    self._say_nothing_to_resume(saved)
                return saved.result()
            agent, headers = self._agent(saved, sessions, options)
            with observing(agent, **options.observe, secrets=header_secrets(headers)):
                return warm_then(agent, lambda: agent.aresume(session_id, force=options.force))

    def _agent(self, saved: AgentSession, sessions: SQLiteStore, options: ResumeOptions
               ) -> tuple[Agent, dict[str, str]]:
        """The agent the session recorded, with what ``options`` override; shown live."""
        if RunConfig.forged(saved.metadata):
            typer.echo(f"miniagent: warning: session {saved.id} carries a command-line record "
                       "that miniagent's command line did not write (no valid seal): it is "
                       "ignored; give the model server and tools as options", err=True)
        config = RunConfig.recorded(saved.metadata).merged(
            base_url=options.base_url, model=options.model, tools=options.tools,
            mode=options.mode)
        interactive = asks_in_terminal(detach=options.detach, as_json=options.as_json)
        headers = parse_headers(options.mcp_header)
        agent = build_agent(config, sessions, api_key=options.api_key, interactive=interactive,
                            mcp_headers=headers, verbose=options.verbose)
        StoppableAnswers.for_approvals(agent)  # a decision made elsewhere ends its question
        show_progress(agent, as_json=options.as_json, verbose=options.verbose)
        if not options.as_json:
            _show_decided(agent, saved)
        return agent, headers

    def _say_nothing_to_resume(self, session: AgentSession) -> None:
        """In words: the session's status and why there is nothing to resume (instead of a
        silent exit)."""
        why = _WHY_IT_ENDED.get(session.status, "it cannot go on")
        typer.echo(visible(f"Session {session.id} {_ended(session)}; there is nothing to "
                           f"resume: {why}. See it with:"))
        typer.echo(visible(session_command("show", session.id, self.store)))


def _ended(session: AgentSession) -> str:
    return f"has ended ({session.status}: {session.reason})"


def _warn_forced(session_id: str, force: bool) -> None:
    if force:
        typer.echo(f"miniagent: warning: --force: another process may still be running session "
                   f"{session_id}; it is taken over anyway (that process stops at its next "
                   "checkpoint, but a tool call it is running may still finish)", err=True)


def _check_something_waits(session: AgentSession, verb: str, store: Path | None) -> None:
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
        args = json.dumps(call_to_run(record).arguments, ensure_ascii=False)
        then = ("it runs now" if record.state == "approved"
                else "it is not run, and the model is told why")
        if record.edited_arguments is not None:
            then += ", with a person's edited arguments"
        note = f" ({markup(record.note)})" if record.note else ""
        console.print(f"[bold yellow]{record.state.capitalize()}[/bold yellow]{note}: "
                      f"{markup(record.call.name, 200)} {markup(args, 300)} "
                      f"[dim]({markup(record.call.id, 100)})[/dim]; {then}")

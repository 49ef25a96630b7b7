"""``miniagent chat``: a conversation in the terminal, each line the next turn of one session.

The agent, its live trace, its approvals and its errors are ``miniagent run``'s (the same
options, :class:`~miniagent.cli.display.TraceDisplay`, the terminal approver,
:func:`~miniagent.cli.common.cli_errors`); only the reading of lines is the chat's own.
Ctrl-C stops the turn that runs (the session keeps what it saved) or clears the line being
typed; Ctrl-D or ``/exit`` leaves.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

import typer
from rich.table import Table

from miniagent._internal.wording import counted
from miniagent.cli.build import RunConfig, open_store
from miniagent.cli.chat_input import LineHistory, StoppableAnswers, history_path
from miniagent.cli.common import cli_errors, fail, show_progress
from miniagent.cli.display import TraceDisplay, approval_hint, terminal
from miniagent.cli.loading import listed_schemas
from miniagent.cli.mcp_cmd import header_secrets
from miniagent.cli.observing import observing
from miniagent.cli.run_options import RunOptions
from miniagent.cli.safe_text import markup, visible
from miniagent.cli.session_view import sessions_table
from miniagent.cli.warming import warm_then
from miniagent.core.agent import Agent
from miniagent.core.errors import MiniAgentError, UserError
from miniagent.core.store.base import random_id
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.core.types import RunResult

PROMPT = "you> "
LISTED_SESSIONS = 10
"""Sessions shown by ``/sessions``."""

COMMANDS = {
    "/new": "start a new session with the next line",
    "/sessions": f"the {LISTED_SESSIONS} sessions of the store updated last",
    "/resume ID": "continue that session (its id, or its first characters)",
    "/tools": "the agent's tools",
    "/help": "this list",
    "/exit": "leave (/quit and Ctrl-D too)",
}


def chat(*, options: RunOptions) -> None:
    """Talk with an agent: each line is the next turn of one conversation (a session).

    Approvals are asked here. Ctrl-C stops a turn (the session is kept), Ctrl-D leaves;
    /help lists the commands (/new, /sessions, /resume, /tools, /exit).
    """
    if options.temporal:
        raise fail("chat runs its sessions in this process: --temporal is not supported (ask "
                   "a cluster with: miniagent run --temporal HOST:PORT QUESTION)")
    config = options.config()
    with contextlib.ExitStack() as stack:
        with cli_errors(verbose=options.verbose):
            store = open_store(options.store)
            agent, headers = options.agent(config, interactive=sys.stdin.isatty(), store=store)
            answers = StoppableAnswers.for_approvals(agent)
            display = show_progress(agent, as_json=False, verbose=options.verbose)
            stack.enter_context(observing(agent, **options.observe(),
                                          secrets=header_secrets(headers)))
        conversation = Conversation(agent, config, store, where=options.store, display=display,
                                    answers=answers, verbose=options.verbose)
        with LineHistory(history_path()) as history:
            conversation.talk(history.read_line)


class Conversation:
    """The chat's state: which session the next line continues, and its commands."""

    def __init__(self, agent: Agent, config: RunConfig, store: SQLiteStore, *,
                 where: Path | None, display: TraceDisplay | None,
                 answers: StoppableAnswers | None, verbose: bool) -> None:
        self.agent, self.config, self.store = agent, config, store
        self.where, self.display, self.verbose = where, display, verbose
        self.answers = answers
        self.session_id: str | None = None
        """The session the next line continues; None: the next line starts one."""
        self.console = terminal()

    def talk(self, read_line: Callable[[str], str]) -> None:
        self.console.print("[dim]miniagent chat: each line continues the conversation; /help "
                           "lists the commands, Ctrl-D leaves[/dim]")
        while True:
            try:
                line = read_line(PROMPT).strip()
            except EOFError:
                self.console.print()
                return
            except KeyboardInterrupt:  # the line typed so far is dropped, as in a shell
                self.console.print()
                continue
            if line.startswith("//"):  # a question that begins with a slash
                self.turn(line[1:])
            elif line.startswith("/"):
                if not self.command(line):
                    return
            elif line:
                self.turn(line)

    def command(self, line: str) -> bool:
        """Do what a ``/command`` line says; False: leave the chat."""
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        if name in ("/exit", "/quit"):
            return False
        if name == "/new":
            self.session_id = None
            self.console.print("[dim]the next line starts a new session[/dim]")
        elif name == "/sessions":
            self.guarded(self.show_sessions, stopped="stopped")
        elif name == "/resume":
            self.resume(argument)
        elif name == "/tools":
            self.show_tools()
        elif name == "/help":
            width = max(map(len, COMMANDS))
            for usage, what in COMMANDS.items():
                self.console.print(f"  {usage:<{width}}  {what}")
            self.console.print("  a line that begins with // is sent as a question, less one /")
        else:
            self.console.print(f"unknown command {markup(name, 40)}: /help lists the commands")
        return True

    def turn(self, question: str) -> None:
        """Run ``question`` as the next turn of the current session (or of a new one)."""
        if self.session_id is None:
            self.session_id = random_id()
            self.console.print(f"[dim]session {self.session_id}[/dim]")
        session_id = self.session_id

        def ask() -> None:  # warmed up first, in the turn's own event loop
            self.waiting(warm_then(self.agent, lambda: self.agent.arun(
                question, session_id=session_id, metadata=self.config.metadata())))

        stopped = self.guarded(ask)
        if stopped and self._calls_open(session_id):
            self.console.print(f"(a tool call was under way: /resume {session_id} finishes "
                               "the turn before the next question, once the call has ended; "
                               "its result is kept)", markup=False)

    def _calls_open(self, session_id: str) -> bool:
        try:
            return bool(self.store.load(session_id).open_calls())
        except MiniAgentError:  # not saved yet, or unreadable: the next line will say
            return False

    def resume(self, prefix: str) -> None:
        """Make ``prefix``'s session the current one; if it waits for approval or was stopped
        during a call, resume it first (the approvals are asked here)."""
        if not prefix:
            self.console.print("usage: /resume ID (/sessions lists them)")
            return

        def switch() -> None:
            session_id = self.store.resolve(prefix)
            saved = self.store.load(session_id)
            if saved.status == "cancelled":
                raise UserError(f"session {session_id} was cancelled: it takes no more turns")
            self.session_id = session_id
            self.console.print(f"[dim]session {markup(session_id, 40)} ({markup(saved.status, 40)}"
                               f", {counted(len(saved.turns), 'turn')}, the last: "
                               f"{markup(saved.turn.question, 200)}); the next line continues "
                               "it[/dim]")
            if saved.status == "awaiting_approval" or saved.open_calls():
                self.waiting(self.agent.resume(session_id))

        self.guarded(switch, prefix)

    def show_sessions(self) -> None:
        rows = self.store.list(LISTED_SESSIONS)
        turns = {}
        for row in rows:  # a session that cannot be loaded is listed, its turns unknown
            with contextlib.suppress(MiniAgentError, RecursionError):
                turns[row.session_id] = str(len(self.store.load(row.session_id).turns))
        self.console.print(sessions_table(rows, turns))

    def show_tools(self) -> None:
        def listed() -> None:
            table = Table("tool", "description")
            for schema in listed_schemas(self.agent.sources):
                function = schema["function"]
                table.add_row(markup(function["name"], 80),
                              markup(" ".join((function.get("description") or "").split()), 300))
            self.console.print(table)

        self.guarded(listed, stopped="stopped")

    def waiting(self, result: RunResult) -> None:
        """A turn that ended waiting (the approval was not answered): how to decide."""
        if result.status == "awaiting_approval":
            self.console.print(visible(approval_hint(result, self.where)), markup=False)
            self.console.print(f"Or ask here again: /resume {result.session_id}", markup=False)

    def guarded(self, work: Callable[[], None], session: str | None = None, *,
                stopped: str = "turn stopped; the session is kept") -> bool:
        """Do ``work``: an error is its one line, Ctrl-C stops it (then True); the chat goes
        on either way."""
        try:
            with cli_errors(session or self.session_id, verbose=self.verbose):
                work()
        except typer.Exit:  # cli_errors printed the error's line
            pass
        except KeyboardInterrupt:
            if self.answers is not None and self.answers.give_up():
                self.console.print()  # after the unanswered question's line
            if self.display is not None:
                self.display.stop()
            self.console.print(stopped)
            return True
        return False

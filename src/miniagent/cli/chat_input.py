"""What ``miniagent chat`` reads from the terminal: lines (with readline's editing and a
history file) and the approver's answers (which a stopped turn gives up on)."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import TextIO, cast

import typer

from miniagent.cli.build import ask_in_terminal
from miniagent.cli.safe_text import visible
from miniagent.core.agent import Agent
from miniagent.core.store.sqlite import default_store_path
from miniagent.core.types import PendingApproval

HISTORY_LENGTH = 1000
"""Lines kept in the history file."""


class StoppableAnswers:
    """Where the terminal approver reads its answer: standard input, until the turn that
    asked is stopped. (Ctrl-C stops the turn, but not the thread the approver asks in, which
    would otherwise go on reading the lines meant for the chat.)"""

    POLL = 0.1
    """Seconds between looks at whether the turn was stopped."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()

    @classmethod
    def for_approvals(cls, agent: Agent) -> StoppableAnswers | None:
        """Give ``agent``'s terminal approver (if it has one) answers that can be stopped."""
        if agent.approver is not ask_in_terminal or os.name != "posix":
            return None
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):  # input that is no file: asked as before
            return None
        answers = cls(fd)
        agent.approver = AskingHere(answers)
        return answers

    def readline(self) -> str:
        """The next line typed (the terminal sends whole lines); EOFError once stopped."""
        self._idle.clear()
        try:
            while not self._stop.is_set():
                if select.select([self.fd], [], [], self.POLL)[0]:
                    data = os.read(self.fd, 65536)
                    if not data:
                        raise EOFError
                    return data.decode(errors="replace")
            raise EOFError
        finally:
            self._idle.set()

    def give_up(self) -> bool:
        """Make a question being asked end unanswered, before the chat reads again; whether
        one was being asked."""
        asking = not self._idle.is_set()
        self._stop.set()
        self._idle.wait(10 * self.POLL)
        self._stop.clear()
        return asking


class AskingHere:
    """The terminal approver reading :class:`StoppableAnswers`; when the call is decided in
    another process meanwhile (``miniagent sessions approve``), the run gives the question up
    (:mod:`miniagent.core.runtime.inprocess`) and this says so."""

    def __init__(self, answers: StoppableAnswers) -> None:
        self.answers = answers

    def __call__(self, pending: PendingApproval) -> bool | None:
        return ask_in_terminal(pending, stream=cast(TextIO, self.answers))

    def give_up(self) -> None:
        if self.answers.give_up():
            typer.echo()  # after the unanswered question's line
        typer.echo("decided in another process; going on with that decision")


def history_path() -> Path:
    """``MINIAGENT_CHAT_HISTORY``, else ``chat_history`` beside the default session store."""
    explicit = os.environ.get("MINIAGENT_CHAT_HISTORY")
    if explicit:
        return Path(explicit).expanduser()
    return default_store_path().parent / "chat_history"


class LineHistory:
    """readline's line editing, with the lines of earlier chats (the last
    :data:`HISTORY_LENGTH`) read from a file and each new line written back at once.

    Without a terminal, or a readline module (Windows), lines are read plainly and nothing
    is kept.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.readline: ModuleType | None = None

    def __enter__(self) -> LineHistory:
        if not sys.stdin.isatty():  # lines piped in are not a person's to recall
            return self
        try:
            import readline
        except ImportError:
            return self
        self.readline = readline
        readline.set_history_length(HISTORY_LENGTH)
        with contextlib.suppress(OSError):  # none yet, or unreadable: start afresh
            readline.read_history_file(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        self.readline = None

    def read_line(self, prompt: str) -> str:
        line = input(prompt)
        if self.readline is not None and line.strip():
            self._save()
        return line

    def _save(self) -> None:
        assert self.readline is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.readline.write_history_file(self.path)
        except OSError as exc:
            typer.echo(visible(f"miniagent: the chat history cannot be written to {self.path} "
                               f"({exc.strerror or exc}); set MINIAGENT_CHAT_HISTORY"), err=True)
            self.readline = None  # said once

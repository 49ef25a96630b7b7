"""What the CLI's commands share: options, error handling, how a result is shown."""

from __future__ import annotations

import logging
import math
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from miniagent._internal.extras import missing_extra
from miniagent.cli.safe_text import json_text, unicode_stream, visible
from miniagent.cli.session_commands import resume_command
from miniagent.core.agent import Agent
from miniagent.core.errors import MiniAgentError, UserError
from miniagent.core.runtime.events import Event
from miniagent.core.types import RunResult

if TYPE_CHECKING:
    from miniagent.cli.display import TraceDisplay
    from miniagent.temporal.agent import TemporalAgent


class Mode(str, Enum):
    """How tool calls travel: text ReAct, the native tools field, a thought then a native
    call (hybrid), or auto-detected."""

    react = "react"
    native = "native"
    hybrid = "hybrid"
    auto = "auto"


class Aids(str, Enum):
    """The aids for weak models: those measured to help the model (auto), all, or none."""

    auto = "auto"
    on = "on"
    off = "off"


class Compress(str, Enum):
    """Who writes the summary of the oldest rounds: a plain cut of each result, or the model."""

    truncate = "truncate"
    model = "model"


StoreOption = Annotated[Path | None, typer.Option(
    "--store", help="Session store file [env: MINIAGENT_STORE; default: "
    "~/.local/share/miniagent/sessions.db]")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]

def positive_seconds(value: float | None) -> float | None:
    """An option callback: seconds must be a positive, finite number (or not given)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a positive number of seconds, got {value}")
    return value


EXIT_CODES = {"completed": 0, "awaiting_approval": 3}
"""Exit status by run status; any other status exits 1."""


def echo_json(value: object, *, indent: int | None = None) -> None:
    """Print ``value`` as one JSON text; all-ASCII where stdout cannot encode Unicode."""
    typer.echo(json_text(value, indent=indent, ascii_only=not unicode_stream(sys.stdout)))


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as the one error line (it may quote a server or a session file)."""
    typer.echo(f"miniagent: {visible(message)}", err=True)
    return typer.Exit(code)


@contextmanager
def cli_errors(session_id: str | None = None, *, verbose: bool = False) -> Iterator[None]:
    """Our exceptions become one line on stderr (exit 2 for usage mistakes, else 1); so does
    a module of an extra that is not installed, with the command that installs it.

    So does data nested deeper than Python's recursion limit (a damaged or hostile session
    row), wherever in loading, deciding or printing it is met; ``session_id`` names it. What
    the library logs meanwhile (a failing subscriber, a bug of ours) is one line too, with
    its traceback only when ``verbose``.
    """
    logger = logging.getLogger("miniagent")
    handler = _OneLineLog(verbose=verbose)
    logger.addHandler(handler)
    try:
        yield
    except UserError as exc:
        raise fail(str(exc), 2) from None
    except MiniAgentError as exc:
        raise fail(str(exc), 1) from None
    except ModuleNotFoundError as exc:
        missing = missing_extra(exc, "this command")
        if missing is None:
            raise
        raise fail(str(missing), 2) from None
    except RecursionError:
        what = f"session {session_id}" if session_id else "the data"
        raise fail(f"{what} cannot be read: it is nested too deeply", 1) from None
    finally:
        logger.removeHandler(handler)


class _OneLineLog(logging.Handler):
    """Log records of the library as ``miniagent: message`` lines on (the current) stderr."""

    def __init__(self, *, verbose: bool) -> None:
        super().__init__(logging.WARNING)
        self.verbose = verbose

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                if self.verbose:
                    text += "\n" + "".join(traceback.format_exception(exc)).rstrip()
                else:
                    text += f" ({type(exc).__name__}: {' '.join(str(exc).split())}; " \
                            "--verbose shows the traceback)"
            typer.echo(f"miniagent: {visible(text)}", err=True)
        except Exception:
            self.handleError(record)


class SessionTracker:
    """A per-run subscriber (``on_event``) that learns the run's session id from its events."""

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id = session_id

    def __call__(self, event: Event) -> None:
        self.session_id = event.session_id


@contextmanager
def interrupted(tracker: SessionTracker, store: Path | None) -> Iterator[None]:
    """Ctrl-C exits 130 with one line: which session stopped and how to continue it."""
    try:
        yield
    except KeyboardInterrupt:
        if tracker.session_id is None:
            raise fail("interrupted before a session was started", 130) from None
        raise fail(f"interrupted: session {tracker.session_id} stopped after its last saved "
                   f"step; continue it with: {resume_command(tracker.session_id, store)}",
                   130) from None


def asks_in_terminal(*, detach: bool, as_json: bool) -> bool:
    """Whether approvals are asked here: a person at a terminal, who did not opt out."""
    return not (detach or as_json) and sys.stdin.isatty()


def show_progress(agent: Agent | TemporalAgent, *, as_json: bool,
                  verbose: bool) -> TraceDisplay | None:
    """Show the agent's runs live (unless ``as_json``); the display, to tidy it after Ctrl-C."""
    if as_json:
        return None
    from miniagent.cli.display import TraceDisplay

    display = TraceDisplay(verbose=verbose)
    agent.subscribe(display)
    return display


def finish(result: RunResult, *, as_json: bool, store: Path | None = None,
           temporal: str | None = None) -> NoReturn:
    """Print the result (JSON, or how to approve what waits) and exit with its code; the same
    for a session in a store and one on a Temporal cluster."""
    from pydantic_core import to_jsonable_python

    from miniagent.cli.display import approval_hint, result_to_json

    if as_json:
        echo_json(result_to_json(result))
    elif result.output is not None:
        echo_json(to_jsonable_python(result.output))
    elif result.status == "awaiting_approval":
        typer.echo(approval_hint(result, store, temporal))
    raise typer.Exit(EXIT_CODES.get(result.status, 1))

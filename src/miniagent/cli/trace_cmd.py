"""``miniagent trace show FILE`` and ``miniagent trace html FILE -o report.html``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from miniagent._internal.wording import counted
from miniagent.cli.common import cli_errors, fail
from miniagent.cli.safe_text import visible

trace_app = typer.Typer(no_args_is_help=True,
                        help="Read a JSONL trace written by 'miniagent run --trace FILE'.")

TraceFile = Annotated[Path, typer.Argument(help="A JSONL trace (miniagent run --trace FILE).")]


@trace_app.command("show")
def show(
    file: TraceFile,
    full: Annotated[bool, typer.Option("--full", help="Also each prompt and raw output, "
                                       "nothing shortened.")] = False,
) -> None:
    """Print a trace readably: each run, step, action, observation, guard and the result."""
    from miniagent.cli.trace_show import trace_lines
    from miniagent.observe.reader import read_trace

    with cli_errors():
        trace = read_trace(file)
        for line in trace_lines(trace, full=full):
            typer.echo(line)


@trace_app.command("html")
def html(
    file: TraceFile,
    out: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path(
        "trace.html"),
) -> None:
    """Write a trace as one self-contained HTML page: timeline, prompts, outputs, tokens."""
    from miniagent.report.trace import write_trace_html

    with cli_errors():
        try:
            trace = write_trace_html(file, out)
        except OSError as exc:
            raise fail(f"cannot write {visible(str(out))}: {exc.strerror or exc}") from None
    steps = sum(len(run.steps) for run in trace.runs)
    typer.echo(visible(f"wrote {out} ({counted(len(trace.runs), 'run')}, "
                       f"{counted(steps, 'step')})"))

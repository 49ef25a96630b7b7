"""Warming up before the first step, as the CLI shows it: a status line on a terminal while the
warm-ups run, one warning line per warm-up that failed (the run goes on: that tool warms on its
first call instead). See :mod:`miniagent.core.tools.warmup`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer

if TYPE_CHECKING:
    from miniagent.core.agent import Agent
    from miniagent.core.tools.warmup import WarmupReport

T = TypeVar("T")

STATUS = "warming up tools and model ..."
"""The status line shown on a terminal while the warm-ups run."""


async def shown(start: Callable[[], Awaitable[WarmupReport]]) -> WarmupReport:
    """``start()``'s report, with the status line while it runs and a warning per failure."""
    from rich.console import Console

    from miniagent.cli.safe_text import visible

    console = Console(stderr=True, highlight=False)
    library_log = logging.getLogger("miniagent.warmup")
    was_disabled, library_log.disabled = library_log.disabled, True  # the line below says it
    try:
        if console.is_terminal:
            with console.status(f"[dim]{STATUS}[/dim]", spinner="dots"):
                report = await start()
        else:
            report = await start()
    finally:
        library_log.disabled = was_disabled
    for outcome in report.failed:
        typer.echo(visible(f"miniagent: warning: warm-up of {outcome.name} failed: "
                           f"{outcome.error}; it warms on first use instead"), err=True)
    return report


def warm_then(agent: Agent, work: Callable[[], Awaitable[T]]) -> T:
    """What ``agent.run`` does, warmed up first in the same event loop (MCP servers stay
    connected for the run): :meth:`Agent.start <miniagent.core.agent.Agent.start>` shown, then
    ``work()``, then the agent closed."""
    from miniagent._internal.aio import run_coroutine

    async def main() -> T:
        try:
            await shown(agent.start)
            return await work()
        finally:
            await agent.aclose()

    return run_coroutine(main())

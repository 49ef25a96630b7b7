"""Warm-ups: paying a slow first call at start instead of in the first step.

What can be warmed:

- a tool that declares a warm-up, ``@tool(warmup=fn)`` (``fn`` sync or async, no arguments:
  open a connection pool, load an index, fill a cache);
- a tool source with an ``async warmup()`` method: an MCP server starts (or reaches) its server
  and lists its tools; an agent used as a tool warms its own agent; the wrappers of
  :mod:`miniagent.core.tools.wrappers` pass it on;
- a tool source that holds several things to warm lists them, ``warmups()``: a
  :class:`~miniagent.core.tools.toolbox.ToolRegistry` lists its tools' warm-ups (each warmed
  once per process, whichever registries hold the tool);
- a model with a ``warmup(request)`` method: the embedded model loads its weights and evaluates
  the prompt of the first request, so that the first step finds it in the KV cache.

:meth:`Agent.start <miniagent.core.agent.Agent.start>` (and ``async with agent:``) runs what its
tools, sources and model declare with :func:`run_warmups`: all at once, each under a timeout.

Once per process: a record keyed by the object warmed (a tool's warm-up function, a source, a
model) remembers the warm-ups that succeeded, so a second agent sharing a tool or a source does
not warm it again, and a start that meets a warm-up in flight (another agent's, on any thread)
waits for that one. A warm-up that failed or timed out is not recorded: it is reported, the
tool stays usable (its first call pays the cold start, as without warm-up), and the next start
tries again. Closing an agent (:meth:`Agent.aclose <miniagent.core.agent.Agent.aclose>`) makes its
sources cold again (:func:`forget`): a closed MCP server's connection is gone. A source may
also say it went cold (``is_warm()``: an MCP server whose process has ended since), and so may
a model (the embedded model after ``unload()``): its next start warms it again.

A warm-up cut at its timeout, or whose start was cancelled, may go on: a sync one cannot be
stopped (its thread runs until the function returns), an async one may ignore its cancellation.
It is left behind, at most one per warm-up: until it ends, later starts wait for it (within
their own timeout) instead of running it a second time, and if it then succeeds the thing is
warm. A thread settles the record whenever it ends; an async warm-up still running when its
event loop is closed (it ignored that cancellation too) never will, so a start in another loop
runs it anew.

The record itself (keys, waiting, what is left behind) is :mod:`miniagent.core.tools.warmup_record`.

Nothing here raises on a warm-up's failure: the :class:`WarmupReport` says what warmed, how long
it took, and what failed and why; each failure is also logged as a warning (logger
``miniagent``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from miniagent.core.errors import ToolError
from miniagent.core.tools.warmup_record import WarmupStatus, forget, once

if TYPE_CHECKING:
    from miniagent.core.tools.tool import Tool
    from miniagent.core.tools.toolbox import ToolSource

__all__ = ["Warmup", "WarmupOutcome", "WarmupReport", "WarmupStatus", "forget", "model_warmups",
           "run_warmups", "source_warmups", "tool_warmups", "warm_all"]

log = logging.getLogger("miniagent.warmup")
"""Where a failed warm-up is logged (the CLI, which prints its own line, silences it)."""


@dataclass(frozen=True, kw_only=True)
class Warmup:
    """One thing to warm.

    Attributes:
        name: what the report calls it (``tool search``, ``MCPServer('time')``, ...).
        key: the object whose warm-up this is: it is warmed once per process (a bound method
            is its function on its object; a wrapped source is the source it wraps).
        run: the warm-up, called with no arguments; sync (run on a worker thread) or async.
        still_warm: asked before a start counts it as warm already: False makes it run again
            (an MCP server whose process died since, an unloaded model: their ``is_warm``);
            None: once warm, warm for the process.
        at_least: seconds this warm-up may take even when the start's timeout is shorter
            (an embedded model's first prompt grows with its size: its ``warmup_seconds``).
    """

    name: str
    key: object
    run: Callable[[], Any]
    still_warm: Callable[[], bool] | None = None
    at_least: float | None = None


@dataclass(frozen=True, kw_only=True)
class WarmupOutcome:
    """How one warm-up went.

    Attributes:
        name: the :attr:`Warmup.name`.
        status: see :data:`WarmupStatus`.
        seconds: how long this start spent on it (waiting for another's included).
        error: why it failed or that it timed out; ``None`` when it is warm.
    """

    name: str
    status: WarmupStatus
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the thing is warm now."""
        return self.status in ("warmed", "already_warm")

    def __str__(self) -> str:
        if self.ok:
            return f"{self.name}: {self.status.replace('_', ' ')} ({self.seconds:.2f} s)"
        return f"{self.name}: {self.error}"


@dataclass(frozen=True, kw_only=True)
class WarmupReport:
    """What a start warmed, how long each took, and what failed and why.

    Attributes:
        outcomes: one per warm-up, in the order they were declared.
        seconds: the wall time of the whole start (the warm-ups ran concurrently).
    """

    outcomes: tuple[WarmupOutcome, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every warm-up succeeded (also when there was none)."""
        return all(outcome.ok for outcome in self.outcomes)

    @property
    def failed(self) -> list[WarmupOutcome]:
        """The warm-ups that failed or timed out."""
        return [outcome for outcome in self.outcomes if not outcome.ok]

    @property
    def warmed(self) -> list[str]:
        """The names of the warm-ups this start ran and that succeeded."""
        return [outcome.name for outcome in self.outcomes if outcome.status == "warmed"]

    def __str__(self) -> str:
        if not self.outcomes:
            return "nothing to warm up"
        done = sum(outcome.ok for outcome in self.outcomes)
        text = f"{done} of {len(self.outcomes)} warm in {self.seconds:.2f} s"
        return "; ".join([text, *(f"failed: {outcome}" for outcome in self.failed)])


# -- what an agent's tools and sources declare -----------------------------------------------

def tool_warmups(tools: Iterable[Tool]) -> list[Warmup]:
    """The warm-ups of ``tools`` that declare one, keyed by the warm-up function (so copies of
    a tool, made by a wrapper's options, share it, and so do tools given the same method of
    one object)."""
    return [Warmup(name=f"tool {tool.name}", key=tool.warmup, run=tool.warmup)
            for tool in tools if tool.warmup is not None]


def source_warmups(sources: Iterable[ToolSource]) -> list[Warmup]:
    """What ``sources`` declare: the warm-ups a source lists (``warmups()``: a registry of
    functions lists each tool's), else the source's own ``warmup()`` if it has one."""
    from miniagent.core.tools.wrappers import innermost

    found: list[Warmup] = []
    for source in sources:
        inner = innermost(source)
        listed = getattr(inner, "warmups", None)
        if callable(listed):
            found += listed()
            continue
        warmup, still_warm = getattr(source, "warmup", None), getattr(inner, "is_warm", None)
        if callable(warmup):
            found.append(Warmup(name=_label(source), key=source, run=warmup,
                                still_warm=still_warm if callable(still_warm) else None))
    return found


def model_warmups(model: object, run: Callable[[], Any] | None = None) -> list[Warmup]:
    """The warm-up of ``model`` if it has one (a ``warmup`` method): ``run``, or its own
    ``warmup()`` called without a request (the embedded model then only loads); its
    ``is_warm()``, if it has one, says when it went cold (an unloaded model)."""
    warmup, still_warm = getattr(model, "warmup", None), getattr(model, "is_warm", None)
    if model is None or not callable(warmup):
        return []
    from miniagent.core.models.describe import describe_model

    at_least = getattr(model, "warmup_seconds", None)
    return [Warmup(name=f"model {describe_model(model).name}", key=model, run=run or warmup,
                   still_warm=still_warm if callable(still_warm) else None,
                   at_least=at_least if isinstance(at_least, int | float) else None)]




def _label(source: object) -> str:
    text = repr(source)
    return text if len(text) <= 120 else f"{text[:117]}..."


# -- running them ----------------------------------------------------------------------------

async def run_warmups(warmups: Sequence[Warmup], *, timeout: float | None
                      ) -> WarmupReport:
    """Run ``warmups`` concurrently, each at most once per process and within ``timeout``
    seconds (``None``: no limit); never raises for a warm-up's failure.

    Example:
        >>> import asyncio
        >>> loaded = []
        >>> report = asyncio.run(run_warmups(
        ...     [Warmup(name="index", key=loaded, run=lambda: loaded.append("index"))],
        ...     timeout=5.0))
        >>> report.warmed, loaded
        (['index'], ['index'])
    """
    report = await _report(warmups, timeout)
    for outcome in report.failed:
        log.warning("warm-up of %s failed: %s (it warms on first use instead)",
                    outcome.name, outcome.error)
    return report


async def warm_all(warmups: Sequence[Warmup]) -> None:
    """Run ``warmups`` like :func:`run_warmups`, without a timeout of their own (the caller's
    applies), and raise :class:`~miniagent.core.errors.ToolError` naming those that failed: the
    ``warmup()`` of a source that warms several things.
    """
    report = await _report(warmups, None)
    if not report.ok:
        raise ToolError("; ".join(str(outcome) for outcome in report.failed))


async def _report(warmups: Sequence[Warmup], timeout: float | None) -> WarmupReport:
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(_once(warmup, timeout) for warmup in warmups))
    return WarmupReport(outcomes=tuple(outcomes), seconds=time.perf_counter() - started)


async def _once(warmup: Warmup, timeout: float | None) -> WarmupOutcome:
    started = time.perf_counter()
    if timeout is not None and warmup.at_least is not None:
        timeout = max(timeout, warmup.at_least)
    status, error = await once(warmup, timeout)
    return WarmupOutcome(name=warmup.name, status=status, error=error,
                         seconds=time.perf_counter() - started)

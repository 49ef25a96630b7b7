"""The tool source of plain functions: :class:`ToolRegistry`.

You register functions (or :class:`~miniagent.core.tools.tool.Tool` objects) in a registry;
a run lists them (:meth:`ToolRegistry.list_tools`) into its toolbox
(:class:`~miniagent.core.tools.toolbox.Toolbox`), which validates every call and hands the
validated ones back here (:meth:`ToolRegistry.call_tool`): the function runs with its arguments
bound, awaited or on a daemon worker thread (``inline`` ones on the event loop), and what it
returns is rendered for the model (:func:`format_result`). What it raises, and a result that
cannot be shown, are error observations.

A sync function on a thread cannot be stopped, and its caller may stop waiting for it: a driver
that sets :data:`late_result` around a call is told when the thread starts and what it returned,
so that a result that comes after the run stopped waiting is kept.

Example:
    >>> from miniagent.core.tools.tool import tool
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> ToolRegistry([add]).names
    ['add']
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from miniagent._internal.aio import run_in_daemon_thread
from miniagent._internal.wording import describe
from miniagent.core.errors import ToolDefinitionError, ToolError
from miniagent.core.tools.tool import (
    Tool,
    preview,
    tool,
)
from miniagent.core.tools.toolbox import Failure, failure_text, guarded, within
from miniagent.core.types import Observation, ToolCall

if TYPE_CHECKING:
    from miniagent.core.tools.warmup import Warmup
    from miniagent.core.types import ToolContext

__all__ = ["NO_OUTPUT", "LateResult", "ToolRegistry", "format_result", "late_result",
           "retryable_failure", "run_function"]

NO_OUTPUT = "(no output)"
"""The observation text of a tool that returned ``None`` (an empty text confuses models)."""


class ToolRegistry:
    """Function and schema tools by name: the tool source of plain functions. It registers
    them, lists them, and runs a call the toolbox validated (the toolbox does the rest).

    Args:
        tools: :class:`Tool` objects or plain callables (wrapped with :func:`tool`).
        default_timeout: seconds to wait for tools that set no timeout; ``None``: no limit.

    Raises:
        ToolDefinitionError: two tools share a name, or a callable cannot become a tool.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        default_timeout: float | None = None,
    ) -> None:
        self.default_timeout = default_timeout
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, fn: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (or a plain callable, wrapped with :func:`tool`) and return it."""
        new = fn if isinstance(fn, Tool) else tool(fn)
        if new.receiver is not None:
            raise ToolDefinitionError(
                f"Tool {new.name!r} is a method that still needs its {new.receiver!r}: register "
                f"it from an instance (obj.{new.name}), not from the class.")
        if new.name in self._tools:
            raise ToolDefinitionError(f"A tool named {new.name!r} is already registered.")
        self._tools[new.name] = new
        return new

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names!r})"

    async def list_tools(self) -> list[Tool]:
        """Its tools, in registration order."""
        return list(self._tools.values())

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        """Run a validated call (``call.arguments`` as the tool's checker made them): the
        function with its arguments bound, sync ones on a daemon worker thread (``inline``
        ones on the event loop). What the function raises, and a result that cannot be
        shown, are error observations."""
        target = self._tools.get(call.name)
        if target is None:
            return _error(call, f"Unknown tool {preview(call.name)}.")
        args, kwargs = target.checker.bind(call.arguments)
        late = late_result.get()
        outcome = await run_function(
            target.fn, target.is_async, args, kwargs, _rendered, inline=target.inline,
            late=None if late is None else _Observing(late, target, call))
        return _observed(target, call, outcome)

    async def warmup(self) -> None:
        """Run its tools' warm-ups (each once per process).

        Raises:
            ToolError: some failed (the message says which, and why).
        """
        from miniagent.core.tools.warmup import warm_all

        await warm_all(self.warmups())

    def warmups(self) -> list[Warmup]:
        """Its tools' warm-ups, each keyed by its function (a start warms each once per
        process, however many registries hold the tool)."""
        from miniagent.core.tools.warmup import tool_warmups

        return tool_warmups(self)

    async def aclose(self) -> None:
        """Nothing to release: function tools hold no resources."""


@dataclasses.dataclass
class _Unshowable:
    """A result whose rendering raised (anything: ``SystemExit`` from a ``__str__`` too)."""

    error: BaseException


class _Observing:
    """Hands a driver's :data:`~miniagent.core.tools.registry.late_result` the observation of what
    a function's thread returned."""

    def __init__(self, late: LateResult, target: Tool, call: ToolCall) -> None:
        self.late, self.target, self.call = late, target, call

    def start(self) -> None:
        self.late.start()

    def finish(self, outcome: Any) -> None:
        self.late.finish(None if outcome is None else _observed(self.target, self.call, outcome))


def _observed(target: Tool, call: ToolCall, outcome: Any) -> Observation:
    """The observation of a function's outcome: what it raised, and a result that cannot be
    shown, are errors."""
    if isinstance(outcome, Failure):
        return _error(call, failure_text(target.name, outcome.error),
                      retryable=retryable_failure(outcome.error, target.idempotent))
    if isinstance(outcome, _Unshowable):
        return _error(call, f"Tool {target.name!r} returned a result that cannot be "
                            f"shown: {describe(outcome.error)}")
    if isinstance(outcome, Observation):
        return outcome  # its own text, error flag and sub-run (an agent used as a tool)
    return Observation(call_id=call.id, tool_name=call.name, output=outcome)


def _rendered(value: Any) -> Observation | str | _Unshowable:
    """What the model reads of a function's result; run inside the call (its thread, its
    guard, its timeout)."""
    if isinstance(value, Observation) and type(value.output) is str:
        return value
    try:
        text = format_result(value)
        return text if type(text) is str else str.__str__(text)
    except BaseException as exc:  # a result's __str__ may raise anything
        return _Unshowable(exc)


def _error(call: ToolCall, text: str, *, retryable: bool = False) -> Observation:
    return Observation(call_id=call.id, tool_name=call.name, output=text, is_error=True,
                       retryable=retryable)


def format_result(value: Any) -> str:
    """Render a tool's return value as observation text.

    ``str`` as is; ``None`` as :data:`NO_OUTPUT`; dicts, lists, tuples, sets, pydantic
    models and dataclasses as JSON (non-ASCII kept readable); anything else with ``str()``.

    Args:
        value: what the tool returned.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return NO_OUTPUT
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    import pydantic_core
    from pydantic import BaseModel

    is_dataclass = dataclasses.is_dataclass(value) and not isinstance(value, type)
    if isinstance(value, dict | list | tuple | set | frozenset | BaseModel) or is_dataclass:
        plain = pydantic_core.to_jsonable_python(value, fallback=str)
        return json.dumps(plain, ensure_ascii=False)
    return str(value)


# -- running a function ----------------------------------------------------------------------

def _same(value: Any) -> Any:
    return value


async def run_function(fn: Callable[..., Any], is_async: bool, args: list[Any],
                       kwargs: dict[str, Any], render: Callable[[Any], Any] = _same, *,
                       inline: bool = False, late: LateResult | None = None) -> Any:
    """``render(fn(*args, **kwargs))``: awaited, or on a daemon worker thread (a sync ``fn``
    with ``inline`` is called right here, on the event loop, in a copy of the context); what
    any raises comes back as a :class:`Failure`. Rendering the result is part of the call: a
    result whose ``__str__`` raises (even ``SystemExit``) or hangs is the tool's problem, under
    the call's guard and timeout, never the run's.

    A sync ``fn`` on a thread cannot be stopped, and its caller may stop waiting for it:
    ``late`` is told when the thread starts and what it returned (rendered, or a
    :class:`Failure`; None for a coroutine it returned, which nobody may run then)."""
    if is_async:  # a task of its own: a tool that swallows its cancellation is left behind
        return await within(guarded(lambda: _then(fn(*args, **kwargs), render)), None)
    if inline:
        result = contextvars.copy_context().run(_call_sync, fn, args, kwargs, render)
    else:
        if late is not None:
            late.start()
        result = await run_in_daemon_thread(
            _call_sync, fn, args, kwargs, render,
            on_done=None if late is None else functools.partial(_finished, late))
    if isinstance(result, _Pending):  # a sync wrapper that returned a coroutine
        return await within(guarded(lambda: _then(result.awaitable, render)), None)
    return result


class LateResult(Protocol):
    """Told about one call's work on a worker thread, which outlives a caller that stops
    waiting (see :data:`late_result`)."""

    def start(self) -> None:
        """A worker thread starts the call's work."""

    def finish(self, outcome: Any) -> None:
        """The thread returned ``outcome``; None: nothing to record."""


def _finished(late: LateResult, result: Any, error: BaseException | None) -> None:
    if error is not None:
        late.finish(Failure(error))
    else:  # a sync wrapper's coroutine runs on the loop only while its caller waits
        late.finish(None if isinstance(result, _Pending) else result)


late_result: contextvars.ContextVar[LateResult | None] = contextvars.ContextVar(
    "miniagent_late_result", default=None)
"""Set by a driver around one tool call: told of work the call runs on a thread and of its
outcome, so that a result that comes after the run stopped waiting is kept (see
:mod:`miniagent.core.runtime.inprocess`). The function source tells it (its observation)."""


async def _then(work: Awaitable[Any], render: Callable[[Any], Any]) -> Any:
    return render(await work)


@dataclasses.dataclass
class _Pending:
    """What a sync function returned that must still be awaited (then rendered)."""

    awaitable: Awaitable[Any]


def _call_sync(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
               render: Callable[[Any], Any]) -> Any:
    try:
        result = fn(*args, **kwargs)
        return _Pending(result) if inspect.isawaitable(result) else render(result)
    except BaseException as exc:  # a worker thread's or an inline call's: the tool's
        return Failure(exc)


def retryable_failure(error: BaseException, idempotent: bool) -> bool:
    """Whether what a tool raised is transient and safe to try again: the tool says so
    (``ToolError(..., retryable=True)``), or an idempotent tool met a connection error or a
    timeout of its own (whether a tool that is not idempotent had an effect is unknown)."""
    if isinstance(error, ToolError):
        return error.retryable
    return idempotent and isinstance(error, ConnectionError | TimeoutError)

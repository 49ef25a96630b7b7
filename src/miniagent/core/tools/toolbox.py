"""Where tools come from (:class:`ToolSource`), the one executor every call goes through
(:class:`Toolbox`), and the source of plain functions (:class:`ToolRegistry`).

A :class:`ToolSource` lists its tools, runs a call of one of them, and can be closed. The
agent's functions and schema tools are one source (a
:class:`~miniagent.core.tools.toolbox.ToolRegistry`); an MCP server
(:class:`~miniagent.mcp.MCPServer`), another agent (:meth:`Agent.as_tool
<miniagent.core.agent.Agent.as_tool>`) and the wrappers of :mod:`miniagent.core.tools.wrappers`
(prefix, filter, rules, stacked on any source) are others. A source may also have an
``async warmup()`` method (not part of the protocol, which it does not need): what makes its
first call fast, run once per process by :meth:`Agent.start <miniagent.core.agent.Agent.start>`.
It raises when warming fails; the source must stay usable then. A source with a connection may
add ``is_warm()`` (False once it is lost: the next start warms it again). See
:mod:`miniagent.core.tools.warmup`.

A run lists its sources once (:meth:`Toolbox.gather`): each tool is kept with the source
that listed it. A call is judged and run here, the same way whatever its source:

1. an unknown name gets the list of valid ones (and a "did you mean");
2. the arguments are checked and coerced (:func:`~miniagent.core.tools.tool.check_arguments`:
   broken JSON, a bare value, missing or unknown names, the tool's schema);
3. the validated call goes to **the source that owns the tool**
   (:meth:`ToolSource.call_tool`: a function runs, an MCP server is sent ``tools/call``, an
   agent answers), with the call's :class:`~miniagent.core.types.ToolContext` installed, under
   the tool's timeout (then the source's call is a task of its own: one that ignores
   cancellation is left behind; without a timeout, the run's deadline leaves the whole run's
   work behind after a grace);
4. whatever happens becomes an :class:`~miniagent.core.types.Observation`; nothing raises but the
   caller's own cancellation;
5. a transient failure is tried again under the tool's :class:`~miniagent.core.retry.RetryPolicy`
   (else the run's, ``ToolContext.default_retry``), with backoff and jitter, never past the
   run's deadline: steps 3 and 4 again, with the same context but its ``attempt`` number (see
   :mod:`miniagent.core.retry` for what is transient, and when a tool that is not idempotent
   is tried again). The observation records the attempts made.

A tool with ``max_concurrency`` runs at most that many calls at once in the process, across all
sessions and agents (:func:`miniagent.core.throttles.tool_slots`, kept per tool definition, not
per name): each attempt takes a slot before step 3 (first come, first served) and gives it back
after step 4. First the tool's ``precheck`` may refuse the call (an agent tool nested too deep),
and a call made inside a call of the same tool (an agent that calls itself) is refused: it
would wait for a slot while its caller holds one, and callers that hold every slot between
them, each waiting so, would wait forever (:func:`miniagent.core.throttles.held_by_callers`).
The wait is not part of the tool's timeout (that is for the tool's work), but the run's deadline
bounds it: a call still waiting then is not run and gets an error observation. A call that has
to wait is reported (:func:`miniagent.core.types.report_wait`: a ``slot_waiting`` event). A
call that timed out gives its slot back at once, even though a sync tool's thread may run on
(Python cannot stop a thread; holding the slot would let one hung call starve the tool).

What a source's call raises comes back as a :class:`Failure` value, so that it is told from our
own :class:`asyncio.TimeoutError`. That includes what does not derive from ``Exception``: a
tool's ``sys.exit()``, ``KeyboardInterrupt`` or its own ``CancelledError`` is the tool failing,
not the run being stopped. Only the caller's cancellation (the run's deadline, the run being
cancelled) cancels a call, and it takes effect at once even when the tool ignores it: the work
runs as a task of its own that is waited for (:func:`within`), never awaited directly.

Approval is judged here too (:meth:`Toolbox.needs_approval`), on the validated arguments, where
the tool lives: a Temporal workflow asks its worker's toolbox, so a predicate that says no never
makes a person wait.

## The source of plain functions

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

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from miniagent._internal.aio import run_in_daemon_thread
from miniagent._internal.wording import counted, describe
from miniagent.core.errors import ToolDefinitionError, ToolError
from miniagent.core.retry import RetryPolicy
from miniagent.core.throttles import held_by_callers, holding, tool_slots
from miniagent.core.tools.tool import Tool, check_arguments, preview, tool
from miniagent.core.types import (
    Observation,
    ToolCall,
    ToolContext,
    replaced,
    report_wait,
    using_context,
)

if TYPE_CHECKING:
    from miniagent.core.tools.warmup import Warmup

__all__ = ["NO_OUTPUT", "Failure", "LateResult", "ToolRegistry", "ToolSource", "Toolbox",
           "failure_text", "format_result", "guarded", "late_result", "records",
           "retryable_failure", "run_function", "within"]


@runtime_checkable
class ToolSource(Protocol):
    """Something that offers tools: list them, run a call, close."""

    async def list_tools(self) -> Sequence[Tool]:
        """The tools offered now (a source may change them between runs)."""
        ...

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        """Run one validated call of a tool it listed; failures are error observations,
        never exceptions. ``context`` is the call's (also installed for
        :func:`~miniagent.core.types.tool_context`)."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds (processes, connections)."""
        ...


def records(sources: Iterable[ToolSource]) -> list[dict[str, Any]]:
    """What the sources that can describe themselves say, to be kept with a session.

    A source offering ``record()`` (an MCP server: its command or URL, never its secrets) is
    listed; the others (the agent's functions) are rebuilt from code on resume.
    """
    found = (getattr(source, "record", None) for source in sources)
    return [record() for record in found if callable(record)]


class Toolbox:
    """Tools by name, each with the source that runs it.

    Args:
        entries: ``(tool, source)`` pairs; names must be unique.
        default_timeout: seconds a call of a tool that sets no timeout may take.

    Raises:
        ToolDefinitionError: two tools share a name.
    """

    def __init__(self, entries: Iterable[tuple[Tool, ToolSource]] = (), *,
                 default_timeout: float | None = None) -> None:
        self.default_timeout = default_timeout
        self._entries: dict[str, tuple[Tool, ToolSource]] = {}
        for entry, source in entries:
            if entry.name in self._entries:
                raise ToolDefinitionError(
                    f"two tools are named {entry.name!r}: give one source a name prefix "
                    "(miniagent.Prefixed) or filter it out (Filtered)")
            self._entries[entry.name] = (entry, source)
        self._listed = tuple(tool for tool, _ in self._entries.values())  # read every step

    @classmethod
    async def gather(cls, sources: Sequence[ToolSource], *,
                     default_timeout: float | None = None) -> Toolbox:
        """List every source once (concurrently) and keep what they offer.

        Raises:
            ToolDefinitionError: a source cannot list its tools, or two tools share a name.
        """
        listed = ([await sources[0].list_tools()] if len(sources) == 1 else
                  await asyncio.gather(*(source.list_tools() for source in sources)))
        return cls(((tool, source) for source, tools in zip(sources, listed, strict=True)
                    for tool in tools), default_timeout=default_timeout)

    # -- what the step logic and the protocols read ---------------------------------------

    @property
    def names(self) -> list[str]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Toolbox({self.names!r})"

    def listed(self) -> list[Tool]:
        """The tools in the order their sources listed them (what the model is offered)."""
        return list(self._listed)

    def get(self, name: str) -> Tool | None:
        entry = self._entries.get(name) if isinstance(name, str) else None
        return entry[0] if entry is not None else None

    def source_of(self, name: str) -> ToolSource | None:
        entry = self._entries.get(name) if isinstance(name, str) else None
        return entry[1] if entry is not None else None

    def timeout_of(self, name: str) -> float | None:
        """Seconds a call of ``name`` may take: the tool's own, else its source's default,
        else this toolbox's; none for an inline tool (it blocks the loop the timer runs on,
        so a timeout could only drop a result that came in late, never stop the call)."""
        entry = self._entries.get(name)
        if entry is None:
            return self.default_timeout
        return self._timeout(*entry)

    def _timeout(self, tool: Tool, source: ToolSource) -> float | None:
        if tool.timeout is not None:
            return tool.timeout
        if tool.inline:
            return None
        own = getattr(source, "default_timeout", None)
        return own if isinstance(own, int | float) else self.default_timeout

    def retry_of(self, name: str, context: ToolContext | None = None) -> RetryPolicy | None:
        """How a call of ``name`` is tried again: the tool's own policy, else the run's
        default (``context.default_retry``); ``None``: once only."""
        return _retry(self.get(name), context)

    def is_idempotent(self, name: str) -> bool:
        """Whether a call of ``name`` may run again after a crash left its outcome unknown."""
        tool = self.get(name)
        return tool is not None and tool.idempotent

    def needs_approval(self, call: ToolCall) -> bool:
        """Whether ``call`` must wait for a person, judged on its validated, coerced arguments.

        A call of an unknown tool, or whose arguments do not validate, never runs (the model
        gets the error instead), so it needs no approval.
        """
        tool = self.get(call.name)
        if tool is None or tool.requires_approval is False:
            return False
        values = check_arguments(tool, call)
        return not isinstance(values, str) and tool.needs_approval(values)

    def openai_schemas(self) -> list[dict[str, Any]]:
        """Every tool in the OpenAI ``tools`` wire format, in order."""
        return [tool.openai_schema() for tool in self.listed()]

    # -- running a call ---------------------------------------------------------------------

    async def execute(self, call: ToolCall, context: ToolContext | None = None) -> Observation:
        """Validate ``call`` and run it in the source that owns the tool; never raises, except
        :class:`asyncio.CancelledError` when the caller is cancelled."""
        started = time.perf_counter()
        try:
            outcome = await self._execute(call, context)
        except Exception as exc:  # last resort: nothing the model sends may escape
            outcome = f"Error executing tool {preview(call.name)}: {describe(exc)}"
        if isinstance(outcome, str):
            outcome = Observation(call_id="", tool_name="", output=outcome, is_error=True)
        return replaced(outcome, call_id=str(call.id), tool_name=str(call.name),
                                   elapsed=time.perf_counter() - started)

    async def _execute(self, call: ToolCall, context: ToolContext | None) -> Observation | str:
        entry = self._entries.get(call.name) if isinstance(call.name, str) else None
        if entry is None:
            return self._unknown_tool(call.name)
        tool, source = entry
        values = check_arguments(tool, call)
        if isinstance(values, str):  # a validation error is never tried again
            return values
        checked = replaced(call, arguments=values)
        policy = _retry(tool, context)
        attempts = 1 if policy is None else policy.max_attempts
        attempt = 1
        while True:
            outcome = await self._attempt(tool, source, checked, context)
            wait = None if attempt >= attempts or not self._transient(tool, outcome) \
                else _wait(policy, attempt, context)
            if wait is None:
                break
            await asyncio.sleep(wait)
            attempt += 1
            if context is not None:
                context = dataclasses.replace(context, attempt=context.attempt + 1)
        if isinstance(outcome, _TimedOut):
            outcome = str.__str__(outcome)  # plain text in the observation
        if attempt == 1:
            return outcome
        if isinstance(outcome, str):
            outcome = Observation(call_id="", tool_name="", output=outcome, is_error=True)
        return dataclasses.replace(outcome, attempts=attempt)

    @staticmethod
    def _transient(tool: Tool, outcome: Observation | str) -> bool:
        """Whether a failed attempt may be tried again: the source says it may (the tool
        raised ``ToolError(retryable=True)``), or an idempotent tool timed out."""
        if isinstance(outcome, _TimedOut):
            return tool.idempotent
        return isinstance(outcome, Observation) and outcome.is_error and outcome.retryable

    async def _attempt(self, tool: Tool, source: ToolSource, checked: ToolCall,
                       context: ToolContext | None) -> Observation | str:
        """One attempt, within the tool's ``max_concurrency`` (a slot per attempt: a call
        waiting to be tried again holds none)."""
        refused = tool.precheck(context) if tool.precheck is not None else None
        if refused is not None:
            return refused
        limit = tool.max_concurrency
        if limit is None:
            return await self._run(tool, source, checked, context)
        key, what = tool.slot_key, f"tool {tool.name}"
        reason = f"{counted(limit, 'call')} at once (max_concurrency)"
        if held_by_callers(key):  # waiting while holding a slot of the same tool can deadlock
            return (f"Tool {tool.name!r} was not run: it is called from inside a call of "
                    f"itself, and a tool limited to {reason} is never run inside its own "
                    "call (the calls holding its slots could each wait for the other's "
                    "forever). Answer without calling it again.")
        slots = tool_slots(key)
        deadline = context.deadline if context is not None else None
        if not await slots.acquire(limit, until=deadline,
                                   on_wait=lambda: report_wait(what, reason)):
            return (f"Tool {tool.name!r} was not run: the run's deadline passed while the call "
                    f"waited for a slot ({reason}).")
        try:
            with holding(key):
                return await self._run(tool, source, checked, context)
        finally:
            slots.release()

    async def _run(self, tool: Tool, source: ToolSource, checked: ToolCall,
                   context: ToolContext | None) -> Observation | str:
        timeout = self._timeout(tool, source)
        with using_context(context) if context is not None else contextlib.nullcontext():
            if timeout is None:  # tasks and threads it starts inherit the context
                outcome = await guarded(lambda: source.call_tool(checked, context))
            else:
                work = asyncio.ensure_future(guarded(lambda: source.call_tool(checked,
                                                                             context)))
        if timeout is not None:
            try:  # the task was made inside the context: it, and threads it starts, inherit it
                outcome = await within(work, timeout)
            except asyncio.TimeoutError:
                return _TimedOut(f"Tool {tool.name!r} timed out after {timeout} s.")
        if isinstance(outcome, Failure):  # the source itself raised (it should not)
            return failure_text(tool.name, outcome.error)
        if not isinstance(outcome, Observation):
            return f"Tool {tool.name!r}'s source returned no observation ({preview(outcome)})."
        return outcome

    def _unknown_tool(self, name: object) -> str:
        if not self._entries:
            return f"Unknown tool {preview(name)}. No tools are available; answer directly."
        text = f"Unknown tool {preview(name)}. Available tools: {', '.join(self._entries)}."
        if isinstance(name, str):
            import difflib  # only for a model that called a tool that does not exist

            close = difflib.get_close_matches(name, list(self._entries), n=1)
            if close:
                text += f" Did you mean {close[0]!r}?"
        return text


def _retry(tool: Tool | None, context: ToolContext | None) -> RetryPolicy | None:
    """The tool's own retry policy, else the run's default (see :meth:`Toolbox.retry_of`)."""
    own = tool.retry if tool is not None else None
    return own if own is not None else (context.default_retry if context else None)


class _TimedOut(str):
    """The text of an attempt that timed out (its outcome is unknown)."""

    __slots__ = ()


def _wait(policy: RetryPolicy | None, attempt: int, context: ToolContext | None
          ) -> float | None:
    """Seconds to wait before the next attempt; ``None`` when the run's deadline would pass
    first (a retry is never slept into the deadline)."""
    if policy is None:
        return None
    delay = policy.delay(attempt)
    if policy.jitter:  # full jitter: calls that failed together do not come back together
        delay = random.uniform(0.0, delay)
    deadline = context.deadline if context is not None else None
    if deadline is not None and time.time() + delay >= deadline:
        return None
    return delay


# -- running one call's work ---------------------------------------------------------------

@dataclasses.dataclass
class Failure:
    """An exception raised by the tool itself (kept apart from our own timeout)."""

    error: BaseException


async def within(work: Awaitable[Any], timeout: float | None) -> Any:
    """Wait for ``work`` in a task of its own; leave it behind on timeout or cancellation.

    Raises:
        asyncio.TimeoutError: ``timeout`` passed (the work is cancelled and left behind).
    """
    task = asyncio.ensure_future(work)
    if timeout is None:  # the cheaper wait: shield leaves the task behind on cancellation
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled() and not _being_cancelled():
                return Failure(asyncio.CancelledError("the tool cancelled itself"))
            task.cancel()  # the run is stopping: do not wait for the tool to agree
            raise
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:  # the run is stopping: do not wait for the tool to agree
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise asyncio.TimeoutError
    if task.cancelled():  # the tool raised CancelledError itself; nobody cancelled it
        return Failure(asyncio.CancelledError("the tool cancelled itself"))
    return task.result()


def _being_cancelled() -> bool:
    """Whether the current task has been asked to stop (its caller, not the tool)."""
    current = asyncio.current_task()
    cancelling = getattr(current, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if callable(cancelling) else False


async def guarded(start: Callable[[], Awaitable[Any]]) -> Any:
    """Await what ``start`` returns; whatever it raises but our cancellation is a Failure."""
    try:
        return await start()
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # SystemExit, KeyboardInterrupt: the tool's, not the run's
        return Failure(exc)


def failure_text(name: str, error: BaseException) -> str:
    if isinstance(error, ToolError):
        return str(error)
    return f"Error executing tool {name!r}: {describe(error)}"


# -- the tool source of plain functions --------------------------------------

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
    """Hands a driver's :data:`~miniagent.core.tools.toolbox.late_result` the observation of what
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

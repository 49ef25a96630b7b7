"""Tools and the tool registry: ``@tool``, :class:`Tool`, :class:`ToolRegistry`.

A tool is a plain typed Python function. ``@tool`` derives its JSON Schema and an
arguments model once (see :mod:`miniagent.tools.schema`); the registry validates the
model's arguments with that model in lax mode and runs the function.

:meth:`ToolRegistry.execute` never raises (except :class:`asyncio.CancelledError`):
an unknown tool, broken or mistyped arguments, a tool that raises or hangs, all
become an :class:`~miniagent.types.Observation` with ``is_error=True`` whose text
tells the model how to repair the call.

Example:
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add(2, 3)
    5
    >>> ToolRegistry([add]).names
    ['add']
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import functools
import inspect
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, overload

from miniagent.errors import ToolDefinitionError, ToolError
from miniagent.threads import run_in_daemon_thread
from miniagent.tools.arguments import NO_OUTPUT, format_result, prepare_arguments, preview
from miniagent.tools.schema import ToolSpec, build_tool_spec
from miniagent.types import Observation, ToolCall

__all__ = ["NO_OUTPUT", "Tool", "ToolRegistry", "format_result", "tool"]

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
"""``requires_approval``: always, never, or a predicate on the call's arguments."""



class Tool:
    """A function the model can call, with its name, description and JSON Schema.

    A ``Tool`` stays callable as the original function: ``add(2, 3) == 5``.
    Build one with :func:`tool`.

    Attributes:
        fn: the wrapped function.
        name: the name the model uses.
        description: what the tool does, for the model.
        parameters: JSON Schema of the arguments object.
        timeout: seconds the registry waits for a result, or ``None`` for its default.
        is_async: whether calling ``fn`` returns an awaitable.
        idempotent: safe to run again after a crash left its outcome unknown.
        requires_approval: ``True``, or a predicate on the arguments dict, when a person
            must approve a call before it runs.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        requires_approval: ApprovalRule = False,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ToolDefinitionError(f"Tool timeout must be a positive number, got {timeout!r}.")
        self.fn = fn
        self.spec: ToolSpec = build_tool_spec(fn, name=name, description=description)
        self.timeout = None if timeout is None else float(timeout)
        self.is_async = _is_async_callable(fn)
        self.idempotent = idempotent
        self.requires_approval = requires_approval
        functools.update_wrapper(self, fn, updated=())

    def needs_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether this call must wait for a person; a predicate that fails counts as yes."""
        rule = self.requires_approval
        if not callable(rule):
            return bool(rule)
        try:
            return bool(rule(arguments))
        except Exception:
            return True

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def parameters(self) -> dict[str, Any]:
        return self.spec.parameters

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, timeout={self.timeout!r})"

    def openai_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools`` wire format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    idempotent: bool = False,
    requires_approval: ApprovalRule = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    idempotent: bool = False,
    requires_approval: ApprovalRule = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a :class:`Tool`; use bare or with options.

    Args:
        fn: the function (when used as ``@tool`` without parentheses).
        name: the tool name; defaults to the function name.
        description: the tool description; defaults to the docstring summary.
        timeout: seconds to wait for a result before giving the model a timeout error.
        idempotent: the tool may run again when a crash left a call's outcome unknown.
        requires_approval: ``True`` or a predicate on the arguments
            (``lambda args: args["amount"] > 100``): such calls wait for a person.

    Raises:
        ToolDefinitionError: the function cannot become a tool (``*args``, ``**kwargs``,
            a parameter type without a JSON Schema, an invalid name, ...).

    Example:
        >>> @tool(name="search_docs", timeout=5.0)
        ... async def search(query: str, limit: int = 5) -> list[str]:
        ...     '''Search the docs.'''
        ...     return []
        >>> search.name, search.parameters["required"]
        ('search_docs', ['query'])
    """

    def wrap(target: Callable[..., Any]) -> Tool:
        if isinstance(target, Tool):
            if name is None and description is None and timeout is None and not (
                idempotent or requires_approval
            ):
                return target
            return Tool(
                target.fn,
                name=name or target.name,
                description=description if description is not None else target.description,
                timeout=timeout if timeout is not None else target.timeout,
                idempotent=idempotent or target.idempotent,
                requires_approval=requires_approval or target.requires_approval,
            )
        return Tool(
            target, name=name, description=description, timeout=timeout,
            idempotent=idempotent, requires_approval=requires_approval,
        )

    return wrap if fn is None else wrap(fn)


class ToolRegistry:
    """The tools of an agent, by name, and their safe execution.

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

    def listed(self) -> list[Tool]:
        """The tools in registration order (what a run offers the model)."""
        return list(self._tools.values())

    def is_idempotent(self, name: str) -> bool:
        """Whether the tool called ``name`` may run again after a crash interrupted it."""
        target = self._tools.get(name)
        return target is not None and target.idempotent

    async def list_tools(self) -> list[Tool]:
        """The registry as a tool source: its tools."""
        return self.listed()

    async def call_tool(self, call: ToolCall) -> Observation:
        """The registry as a tool source: :meth:`execute`."""
        return await self.execute(call)

    async def aclose(self) -> None:
        """Nothing to release: function tools hold no resources."""

    def openai_schemas(self) -> list[dict[str, Any]]:
        """Every tool in the OpenAI ``tools`` wire format, in registration order."""
        return [t.openai_schema() for t in self._tools.values()]

    def needs_approval(self, call: ToolCall) -> bool:
        """Whether ``call`` must wait for a person, judged on its validated, coerced arguments.

        A call of an unknown tool, or whose arguments do not validate, never runs (the model
        gets the error instead), so it needs no approval.
        """
        target = self._tools.get(call.name) if isinstance(call.name, str) else None
        if target is None or target.requires_approval is False:
            return False
        prepared = prepare_arguments(target, call)
        if isinstance(prepared, str):
            return False
        args, kwargs = prepared
        return target.needs_approval({**dict(zip(target.spec.positional_only, args)), **kwargs})

    async def execute_all(self, calls: list[ToolCall]) -> list[Observation]:
        """Run ``calls`` concurrently; the observations come back in call order."""
        return list(await asyncio.gather(*(self.execute(call) for call in calls)))

    async def execute(self, call: ToolCall) -> Observation:
        """Validate and run one call. Never raises, except :class:`asyncio.CancelledError`.

        Args:
            call: the model's request.

        Returns:
            The observation; ``is_error`` is set when the call failed, and the text
            says how to repair it.
        """
        started = time.perf_counter()
        try:
            output, is_error = await self._execute(call)
        except Exception as exc:  # last resort: nothing the model sends may escape
            output, is_error = f"Error executing tool {preview(call.name)}: {_describe(exc)}", True
        return Observation(
            call_id=str(call.id),
            tool_name=str(call.name),
            output=output,
            is_error=is_error,
            elapsed=time.perf_counter() - started,
        )

    async def _execute(self, call: ToolCall) -> tuple[str, bool]:
        target = self._tools.get(call.name) if isinstance(call.name, str) else None
        if target is None:
            return self._unknown_tool(call.name), True
        prepared = prepare_arguments(target, call)
        if isinstance(prepared, str):
            return prepared, True
        args, kwargs = prepared
        timeout = target.timeout if target.timeout is not None else self.default_timeout
        try:
            outcome = await _run_with_timeout(target, args, kwargs, timeout)
        except asyncio.TimeoutError:
            return f"Tool {target.name!r} timed out after {timeout} s.", True
        if isinstance(outcome, _Failure):
            return _failure_text(target.name, outcome.error), True
        try:
            return format_result(outcome), False
        except Exception as exc:
            return (
                f"Tool {target.name!r} returned a result that cannot be shown: {_describe(exc)}",
                True,
            )

    def _unknown_tool(self, name: object) -> str:
        if not self._tools:
            return f"Unknown tool {preview(name)}. No tools are available; answer directly."
        text = f"Unknown tool {preview(name)}. Available tools: {', '.join(self._tools)}."
        if isinstance(name, str):
            close = difflib.get_close_matches(name, list(self._tools), n=1)
            if close:
                text += f" Did you mean {close[0]!r}?"
        return text


# -- running -------------------------------------------------------------------------


@dataclasses.dataclass
class _Failure:
    """An exception raised by the tool itself (kept apart from our own timeout)."""

    error: Exception


async def _run_with_timeout(
    target: Tool, args: list[Any], kwargs: dict[str, Any], timeout: float | None
) -> Any:
    """Run the tool; raises ``TimeoutError`` only for our own timeout.

    Sync tools run in a worker thread. Python cannot kill a thread, so on timeout we
    only stop waiting: the thread runs on until the function returns.
    """
    if target.is_async:
        runner = _call_async(target.fn, args, kwargs)
    else:
        runner = _call_in_thread(target.fn, args, kwargs)
    if timeout is None:
        return await runner
    return await asyncio.wait_for(runner, timeout)


async def _call_async(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return await fn(*args, **kwargs)
    except Exception as exc:
        return _Failure(exc)


async def _call_in_thread(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    result = await run_in_daemon_thread(_call_sync, fn, args, kwargs)
    if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
        try:
            return await result
        except Exception as exc:
            return _Failure(exc)
    return result


def _call_sync(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        return _Failure(exc)


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004  # callable instances
    return call is not None and not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


def _failure_text(name: str, error: Exception) -> str:
    if isinstance(error, ToolError):
        return str(error)
    return f"Error executing tool {name!r}: {_describe(error)}"


def _describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__

"""Tools and the tool registry: ``@tool``, :class:`Tool`, :class:`ToolRegistry`.

A tool is a plain typed Python function, or a JSON Schema with a function that takes the
arguments dict (:meth:`Tool.from_schema`). ``@tool`` derives a function's JSON Schema and an
arguments model once (see :mod:`miniagent.tools.schema`); a schema tool is checked with
:mod:`jsonschema` (see :mod:`miniagent.tools.schema_tool`). Either way the registry
validates and coerces the model's arguments the same lax way and runs the function.

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
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, overload

from miniagent.errors import ToolDefinitionError
from miniagent.tools.arguments import (
    NO_OUTPUT,
    ArgumentsChecker,
    FunctionArguments,
    check_arguments,
    format_result,
    preview,
)
from miniagent.tools.runner import (
    Failure,
    describe,
    failure_text,
    is_async_callable,
    run_with_timeout,
)
from miniagent.tools.schema import ToolSpec, build_tool_spec, check_tool_name
from miniagent.tools.schema_tool import SchemaArguments
from miniagent.types import Observation, ToolCall

__all__ = ["NO_OUTPUT", "Tool", "ToolRegistry", "format_result", "tool"]

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
"""``requires_approval``: always, never, or a predicate on the call's arguments."""


class Tool:
    """A function the model can call, with its name, description and JSON Schema.

    A function tool stays callable as the original function: ``add(2, 3) == 5``.
    Build one with :func:`tool`, or from a JSON Schema with :meth:`from_schema`.

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
        checker: validates a call's arguments and binds them to ``fn``'s parameters.
        spec: what was derived from a function tool's signature; ``None`` for a schema tool.
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
        _check_timeout(timeout)
        spec = build_tool_spec(fn, name=name, description=description)
        self.spec: ToolSpec | None = spec
        self._setup(fn, spec.name, spec.description, spec.parameters, FunctionArguments(spec))
        self._set_options(timeout, idempotent, requires_approval)
        functools.update_wrapper(self, fn, updated=())

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        fn: Callable[[dict[str, Any]], Any],
        timeout: float | None = None,
        idempotent: bool = False,
        requires_approval: ApprovalRule = False,
    ) -> Tool:
        """A tool defined by a JSON Schema; ``fn`` gets the validated arguments dict.

        The model's arguments are coerced the lax way function tools get them (``"20"`` for
        an integer is 20, ``"true"`` for a boolean is ``True``, a number for a string its
        text), missing properties with a ``default`` are filled in (nested ones too), and the
        result is validated with :mod:`jsonschema` (the schema's ``$schema`` draft, else
        2020-12) before ``fn`` runs: sync functions in a worker thread, async ones awaited.

        Args:
            name: the name the model uses (1-64 letters, digits, ``_`` or ``-``).
            description: what the tool does, for the model.
            parameters: a JSON Schema of an object (``"type": "object"`` or ``properties``);
                the tool keeps a copy, with ``"type": "object"`` added when absent.
            fn: called with one argument, the arguments dict; may be async.
            timeout: seconds to wait for a result before giving the model a timeout error.
            idempotent: the tool may run again when a crash left a call's outcome unknown.
            requires_approval: ``True`` or a predicate on the validated arguments dict.

        Raises:
            ToolDefinitionError: an invalid name, a schema that is not valid JSON Schema or
                does not describe an object, a ``$ref`` that cannot be resolved, ``fn`` not
                callable, or a timeout that is not positive.

        Example:
            >>> directions = Tool.from_schema(
            ...     name="get_directions", description="Route between two places.",
            ...     parameters={"type": "object", "properties": {
            ...         "from_": {"type": "string"}, "to": {"type": "string", "default": "home"}},
            ...         "required": ["from_"]},
            ...     fn=lambda args: f"{args['from_']} -> {args['to']}")
            >>> directions.name, directions.parameters["required"]
            ('get_directions', ['from_'])
        """
        check_tool_name(name)
        _check_timeout(timeout)
        if not isinstance(description, str):
            raise ToolDefinitionError(f"Tool {name!r}: description must be a string.")
        if not callable(fn):
            raise ToolDefinitionError(f"Tool {name!r}: fn {fn!r} is not callable.")
        checker = SchemaArguments(name, parameters)
        self = cls.__new__(cls)
        self.spec = None
        self._setup(fn, name, description, checker.schema, checker)
        self._set_options(timeout, idempotent, requires_approval)
        return self

    def _setup(
        self,
        fn: Callable[..., Any],
        name: str,
        description: str,
        parameters: dict[str, Any],
        checker: ArgumentsChecker,
    ) -> None:
        self.fn = fn
        self._name, self._description, self._parameters = name, description, parameters
        self.checker: ArgumentsChecker = checker
        self.is_async = is_async_callable(fn)

    def _set_options(
        self, timeout: float | None, idempotent: bool, requires_approval: ApprovalRule
    ) -> None:
        self.timeout = None if timeout is None else float(timeout)
        self.idempotent = idempotent
        self.requires_approval = requires_approval

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
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        return self._parameters

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


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and not timeout > 0:
        raise ToolDefinitionError(f"Tool timeout must be a positive number, got {timeout!r}.")


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
        if not isinstance(target, Tool):
            return Tool(
                target, name=name, description=description, timeout=timeout,
                idempotent=idempotent, requires_approval=requires_approval,
            )
        if name is None and description is None and timeout is None and not (
            idempotent or requires_approval
        ):
            return target
        options: dict[str, Any] = {
            "name": name or target.name,
            "description": description if description is not None else target.description,
            "timeout": timeout if timeout is not None else target.timeout,
            "idempotent": idempotent or target.idempotent,
            "requires_approval": requires_approval or target.requires_approval,
        }
        if target.spec is None:
            return Tool.from_schema(parameters=target.parameters, fn=target.fn, **options)
        return Tool(target.fn, **options)

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
        values = check_arguments(target, call)
        return not isinstance(values, str) and target.needs_approval(values)

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
            outcome = await self._execute(call)
        except Exception as exc:  # last resort: nothing the model sends may escape
            outcome = f"Error executing tool {preview(call.name)}: {describe(exc)}", True
        if isinstance(outcome, Observation):  # a tool that reports more than text
            return dataclasses.replace(outcome, call_id=str(call.id), tool_name=str(call.name),
                                       elapsed=time.perf_counter() - started)
        output, is_error = outcome
        return Observation(
            call_id=str(call.id),
            tool_name=str(call.name),
            output=output,
            is_error=is_error,
            elapsed=time.perf_counter() - started,
        )

    async def _execute(self, call: ToolCall) -> tuple[str, bool] | Observation:
        target = self._tools.get(call.name) if isinstance(call.name, str) else None
        if target is None:
            return self._unknown_tool(call.name), True
        values = check_arguments(target, call)
        if isinstance(values, str):
            return values, True
        args, kwargs = target.checker.bind(values)
        timeout = target.timeout if target.timeout is not None else self.default_timeout
        try:
            outcome = await run_with_timeout(target.fn, target.is_async, args, kwargs, timeout)
        except asyncio.TimeoutError:
            return f"Tool {target.name!r} timed out after {timeout} s.", True
        if isinstance(outcome, Failure):
            return failure_text(target.name, outcome.error), True
        if isinstance(outcome, Observation) and isinstance(outcome.output, str):
            return outcome  # its own text, error flag and sub-run (an agent used as a tool)
        try:
            return format_result(outcome), False
        except Exception as exc:
            return (
                f"Tool {target.name!r} returned a result that cannot be shown: {describe(exc)}",
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

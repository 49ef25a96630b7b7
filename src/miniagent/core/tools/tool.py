"""Tools: ``@tool``, :class:`Tool`, and how a call's arguments are checked.

A tool is a plain typed Python function, or a JSON Schema with a function that takes the
arguments dict (:meth:`Tool.from_schema`). ``@tool`` derives a function's JSON Schema and an
arguments model once (see :mod:`miniagent.core.tools.schema`); a schema tool is checked with
:mod:`jsonschema` (see :mod:`miniagent.core.tools.schema_tool`). Every :class:`Tool` carries what
any source's tools carry: name, description, schema, arguments checker, timeout,
idempotency and approval rule.

Both kinds of tool check a call's arguments through :func:`check_arguments`, so the steps the
model sees are the same: not valid JSON, a bare value mapped onto a single parameter, missing
and unknown names, then the tool's own :class:`ArgumentsChecker` (a pydantic model for a
function, :mod:`jsonschema` for a schema tool). Every failure becomes one error text that names
what was wrong and shows the schema. The toolbox (:mod:`miniagent.core.tools.toolbox`) runs the
calls; :class:`~miniagent.core.tools.toolbox.ToolRegistry` is the source of function tools.

Example:
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add(2, 3)
    5
    >>> add.name, add.parameters["required"]
    ('add', ['a', 'b'])
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, overload

from miniagent._internal.bounds import seconds
from miniagent.core.errors import ToolDefinitionError
from miniagent.core.retry import RetryPolicy, RetrySetting
from miniagent.core.tools.coercion import NOT_SHOWN, ArgumentProblem
from miniagent.core.tools.schema import ToolSpec, build_tool_spec, check_tool_name
from miniagent.core.types import SlotKey, ToolCall

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from miniagent.core.types import ToolContext

# pydantic is imported inside the functions: it is loaded once the first tool is defined.

__all__ = ["ApprovalRule", "ArgumentProblem", "ArgumentsChecker", "FunctionArguments", "Tool",
           "ToolOptions", "WarmupFunction", "check_arguments", "is_async_callable", "preview",
           "shorten", "tool"]

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
"""``requires_approval``: always, never, or a predicate on the call's arguments."""

WarmupFunction = Callable[[], Any]
"""``warmup``: a function with no arguments, sync or async (see
:mod:`miniagent.core.tools.warmup`)."""


class ToolOptions(TypedDict, total=False):
    """How a tool's calls run: the options :func:`tool`, :class:`Tool` and
    :meth:`Tool.from_schema` take as keywords (described at :func:`tool`)."""

    timeout: float | None
    idempotent: bool
    requires_approval: ApprovalRule
    retry: RetrySetting
    warmup: WarmupFunction | None
    max_concurrency: int | None
    inline: bool


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
        retry: how a call is tried again after a transient failure (``None``: the run's
            default, ``Agent(tool_retry=...)``; see :mod:`miniagent.core.retry`).
        warmup: called once per process when an agent starts (``Agent.start()``), before the
            first call: a function with no arguments, sync or async (see
            :mod:`miniagent.core.tools.warmup`); ``None``: nothing to warm.
        max_concurrency: at most this many calls of the tool run at once in the process,
            across all its sessions and agents (``None``: no limit; see
            :mod:`miniagent.core.throttles`).
        slot_key: what ``max_concurrency`` counts against: this tool and its copies
            (:meth:`with_options`, what the wrappers list), never another tool of its name.
        precheck: why a call would not run, judged from its context before the call waits for
            a slot (an agent tool's nesting depth); ``None`` or a text refusing the call.
        inline: a sync function called on the event loop itself instead of a worker thread
            (see :func:`tool`).
        checker: validates a call's arguments and binds them to ``fn``'s parameters.
        spec: what was derived from a function tool's signature; ``None`` for a schema tool.
        receiver: ``self`` (or ``cls``) of a tool made from a method and taken from its class,
            not yet bound: a registry refuses it. ``obj.method`` is the tool bound to ``obj``
            (see :mod:`miniagent.core.tools.methods`); ``None`` for every other tool.
    """

    max_concurrency: int | None = None
    inline: bool = False
    receiver: str | None = None
    precheck: Callable[[ToolContext | None], str | None] | None = None

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions],
    ) -> None:
        policy = _checked_options(options)
        spec = build_tool_spec(fn, name=name, description=description)
        self.spec: ToolSpec | None = spec
        self._setup(spec.function, spec.name, spec.description, spec.parameters,
                    FunctionArguments(spec))
        self._set_options(options, policy)
        self.receiver = spec.receiver
        functools.update_wrapper(self, spec.function, updated=())

    def __get__(self, instance: object, owner: type | None = None) -> Tool:
        """A tool made from a method, read from an instance (or, for a classmethod, from its
        class), is bound to it as a plain method would be; any other tool is itself."""
        receiver = owner if self.spec is not None and self.spec.binds_class else instance
        if self.receiver is None or receiver is None:
            return self
        from miniagent.core.tools.methods import bind_tool

        return bind_tool(self, receiver)

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        fn: Callable[[dict[str, Any]], Any],
        **options: Unpack[ToolOptions],
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
            retry: a :class:`~miniagent.core.retry.RetryPolicy`, or a number of attempts.
            warmup: run once per process when an agent starts (see :func:`tool`).
            max_concurrency: at most this many calls at once in the process.
            inline: call a sync ``fn`` on the event loop, not a worker thread (see :func:`tool`).

        Raises:
            ToolDefinitionError: an invalid name, a schema that is not valid JSON Schema or
                does not describe an object, a ``$ref`` that cannot be resolved, ``fn`` not
                callable, a timeout that is not positive, or an invalid retry.

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
        policy = _checked_options(options)
        if not isinstance(description, str):
            raise ToolDefinitionError(f"Tool {name!r}: description must be a string.")
        if not callable(fn):
            raise ToolDefinitionError(f"Tool {name!r}: fn {fn!r} is not callable.")
        from miniagent.core.tools.schema_tool import (
            SchemaArguments,  # only tools made from a schema
        )

        checker = SchemaArguments(name, parameters)
        self = cls.__new__(cls)
        self.spec = None
        self._setup(fn, name, description, checker.schema, checker)
        self._set_options(options, policy)
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
        self.slot_key = SlotKey()

    def _set_options(self, options: ToolOptions, retry: RetryPolicy | None) -> None:
        timeout = options.get("timeout")
        self.timeout = None if timeout is None else float(timeout)
        self.idempotent = options.get("idempotent", False)
        self.requires_approval = options.get("requires_approval", False)
        self.retry = retry
        self.warmup = _checked_warmup(self.name, options.get("warmup"))
        self.max_concurrency = options.get("max_concurrency")
        self.inline = _checked_inline(self, options.get("inline", False))

    def with_options(self, *, name: str | None = None, timeout: float | None = None,
                     idempotent: bool | None = None,
                     requires_approval: ApprovalRule | None = None,
                     retry: RetrySetting = None, warmup: WarmupFunction | None = None,
                     max_concurrency: int | None = None, inline: bool | None = None) -> Tool:
        """A copy of this tool with other options (what the source wrappers list); ``None``
        keeps an option as it is."""
        if name is not None:
            check_tool_name(name)
        policy = _checked_options({"timeout": timeout, "max_concurrency": max_concurrency,
                                   "retry": retry})
        other = copy.copy(self)
        if name is not None:
            other._name = name
        if timeout is not None:
            other.timeout = float(timeout)
        if idempotent is not None:
            other.idempotent = idempotent
        if requires_approval is not None:
            other.requires_approval = requires_approval
        if policy is not None:
            other.retry = policy
        if warmup is not None:
            other.warmup = _checked_warmup(other.name, warmup)
        if max_concurrency is not None:
            other.max_concurrency = max_concurrency
        other.inline = _checked_inline(other, other.inline if inline is None else inline)
        return other

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


def _checked_warmup(name: str, warmup: WarmupFunction | None) -> WarmupFunction | None:
    if warmup is not None and not callable(warmup):
        raise ToolDefinitionError(f"Tool {name!r}: warmup {warmup!r} is not callable.")
    return warmup


def _checked_inline(target: Tool, inline: bool) -> bool:
    if inline and target.is_async:
        raise ToolDefinitionError(
            f"Tool {target.name!r}: inline=True is for sync functions; an async one already "
            "runs on the event loop.")
    if inline and target.timeout is not None:
        # the function would block the event loop, where the timer that should stop it runs
        raise ToolDefinitionError(
            f"Tool {target.name!r}: inline=True with timeout={target.timeout:g}: an inline "
            "call runs on the event loop, and nothing (no timeout, no other session) runs "
            "until it returns. Drop inline=True to run it on a worker thread, where the "
            "timeout works, or give it no timeout.")
    return bool(inline)


def _check_known(options: ToolOptions) -> None:
    unknown = sorted(set(options) - ToolOptions.__optional_keys__)
    if unknown:  # what Python says of a keyword a signature does not name
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (a tool takes name, "
                        f"description, {', '.join(sorted(ToolOptions.__optional_keys__))})")


def _checked_options(options: ToolOptions) -> RetryPolicy | None:
    """Refuses an unknown option, a timeout or concurrency limit out of range; the retry
    policy the options set."""
    _check_known(options)
    timeout, limit = options.get("timeout"), options.get("max_concurrency")
    if timeout is not None:
        seconds("Tool timeout", timeout, error=ToolDefinitionError)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise ToolDefinitionError(
            f"Tool max_concurrency must be a positive integer, got {limit!r}.")
    return RetryPolicy.of(options.get("retry"))


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, **options: Unpack[ToolOptions],
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
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
        retry: a :class:`~miniagent.core.retry.RetryPolicy`, or a number of attempts (the
            default backoff), for transient failures (``ToolError(..., retryable=True)``;
            timeouts and connection errors too, if idempotent).
        warmup: a function with no arguments (sync or async) that makes the first call fast
            (opens a connection pool, loads an index); ``Agent.start()`` runs it once per
            process, within ``Agent.start``'s ``timeout`` (see :mod:`miniagent.core.tools.warmup`).
        max_concurrency: at most this many calls of the tool run at once in this process,
            across all sessions and agents; more wait their turn (first come, first served).
        inline: call a sync function on the event loop itself, not on a worker thread: for
            quick functions without I/O (arithmetic, a dict lookup), it saves the thread's
            hand-off (a sixth of a step's client CPU in ``benchmarks/skeleton.py``). Nothing
            else runs meanwhile, and no timer can cut it short: a ``timeout`` with it is
            refused (here, or added by ``with_options`` or a rule), and a default timeout
            (its source's, the toolbox's) does not apply to it. Not for async functions.

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

    _check_known(options)

    def wrap(target: Callable[..., Any]) -> Tool:
        if not isinstance(target, Tool):
            return Tool(target, name=name, description=description, **options)
        return _rewrapped(target, name, description, options)

    return wrap if fn is None else wrap(fn)


def _rewrapped(target: Tool, name: str | None, description: str | None,
               options: ToolOptions) -> Tool:
    """``@tool(...)`` over a tool: a new tool with the options given over the tool's own (the
    tool itself when none is given)."""
    given: dict[str, Any] = {key: value for key, value in options.items()
                             if value is not None and value is not False}
    if name is None and description is None and not given:
        return target
    merged: dict[str, Any] = {
        "timeout": target.timeout, "idempotent": target.idempotent,
        "requires_approval": target.requires_approval, "retry": target.retry,
        "warmup": target.warmup, "max_concurrency": target.max_concurrency, **given,
        # a new tool: one given a timeout runs on a worker thread, where the timeout works
        "inline": given.get("inline", False) or (target.inline and "timeout" not in given),
    }
    name = name or target.name
    description = description if description is not None else target.description
    if target.spec is None:
        return Tool.from_schema(name=name, description=description,
                                parameters=target.parameters, fn=target.fn, **merged)
    return Tool(target.fn, name=name, description=description, **merged)


# -- checking a call's arguments ----------------------------------------------------------------

_PREVIEW_CHARS = 200
_MAX_LISTED_ERRORS = 5


# -- the checker interface -------------------------------------------------------------


class ArgumentsChecker(Protocol):
    """How one kind of tool validates its arguments and passes them to its function."""

    @property
    def names(self) -> tuple[str, ...]:
        """The arguments' names, in schema order."""
        ...

    @property
    def required(self) -> tuple[str, ...]:
        """Names the call must contain (required and without a default)."""
        ...

    def is_known(self, name: str) -> bool:
        """Whether an argument called ``name`` may be sent at all."""
        ...

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any] | list[ArgumentProblem]:
        """The validated, coerced arguments by name (defaults filled in), or the problems."""
        ...

    def bind(self, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """``(args, kwargs)`` for the tool's function, from :meth:`validate`'s values."""
        ...


@dataclasses.dataclass(frozen=True)
class FunctionArguments:
    """The checker of a function tool: its pydantic arguments model, in lax mode."""

    spec: ToolSpec

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.spec.field_names)

    @property
    def required(self) -> tuple[str, ...]:
        return self.spec.required

    def is_known(self, name: str) -> bool:
        return name in self.spec.field_names

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any] | list[ArgumentProblem]:
        from pydantic import ValidationError  # loaded already: a tool exists

        try:
            validated = self.spec.args_model.model_validate(arguments)
        except ValidationError as exc:
            return [_pydantic_problem(error) for error in exc.errors(include_url=False)]
        return {param: getattr(validated, field) for param, field in self.spec.field_names.items()}

    def bind(self, values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        kwargs = dict(values)
        return [kwargs.pop(param) for param in self.spec.positional_only], kwargs


def _pydantic_problem(error: Any) -> ArgumentProblem:
    where = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
    message = error.get("msg", "invalid value")
    if error.get("type") == "missing":
        return ArgumentProblem(where=where, message=message)
    return ArgumentProblem(where=where, message=message, given=error.get("input"))


# -- the shared steps ------------------------------------------------------------------


def check_arguments(target: Tool, call: ToolCall) -> dict[str, Any] | str:
    """The call's validated arguments by name, or an error text for the model.

    Args:
        target: the tool the call names.
        call: the model's request.
    """
    if call.arguments_error:
        return (
            f"The arguments for tool {target.name!r} are not valid JSON "
            f"({shorten(str(call.arguments_error))}). Raw input: {preview(call.raw_arguments)}. "
            f"Send a JSON object matching this schema: {_schema_text(target)}"
        )
    arguments = _arguments_object(target, call)
    if isinstance(arguments, str):
        return arguments
    checker = target.checker
    missing = [name for name in checker.required if name not in arguments]
    unknown = [name for name in arguments if not checker.is_known(name)]
    if missing or unknown:
        return _names_error(target, missing, unknown)
    outcome = checker.validate(arguments)
    if isinstance(outcome, list):
        return _validation_error(target, outcome)
    return outcome


def _arguments_object(target: Tool, call: ToolCall) -> dict[str, Any] | str:
    """The arguments as a dict, mapping a bare value onto the tool's single parameter."""
    arguments = call.arguments
    if not isinstance(arguments, dict):
        return _object_expected(target, preview(arguments))
    raw = call.raw_arguments.strip() if isinstance(call.raw_arguments, str) else ""
    if arguments or not raw:
        return arguments
    try:
        value: Any = json.loads(raw)
    except ValueError:
        if raw.startswith("{"):
            return (
                f"The arguments for tool {target.name!r} are not valid JSON. Raw input: "
                f"{preview(raw)}. Send a JSON object matching this schema: {_schema_text(target)}"
            )
        value = _strip_quotes(raw)
    if isinstance(value, dict):
        return value
    param = _single_parameter(target.checker)
    if param is None:
        return _object_expected(target, preview(raw))
    return {param: value}


def _single_parameter(checker: ArgumentsChecker) -> str | None:
    if len(checker.required) == 1:
        return checker.required[0]
    if len(checker.names) == 1:
        return checker.names[0]
    return None


def _strip_quotes(text: str) -> str:
    for quote in ('"', "'", "`"):
        if len(text) >= 2 and text[0] == quote and text[-1] == quote:
            return text[1:-1].strip()
    return text


def _object_expected(target: Tool, given: str) -> str:
    checker = target.checker
    fields = ", ".join(f"{p} (required)" if p in checker.required else p for p in checker.names)
    return (
        f"Tool {target.name!r} expects a JSON object with the fields: {fields or 'none'}. "
        f"Got {given}. Schema: {_schema_text(target)}"
    )


def _names_error(target: Tool, missing: list[str], unknown: list[str]) -> str:
    parts = [f"Invalid arguments for tool {target.name!r}."]
    if missing:
        parts.append(f"Missing required argument(s): {', '.join(missing)}.")
    if unknown:
        shown = ", ".join(shorten(name, 60) for name in unknown[:10])
        parts.append(f"Unknown argument(s): {shown}.")
    parts.append(f"Valid arguments: {', '.join(target.checker.names) or 'none'}.")
    parts.append(f"Schema: {_schema_text(target)}")
    return " ".join(parts)


def _validation_error(target: Tool, problems: list[ArgumentProblem]) -> str:
    lines = [f"Invalid arguments for tool {target.name!r}:"]
    for problem in problems[:_MAX_LISTED_ERRORS]:
        given = "" if problem.given is NOT_SHOWN else f" (got {preview(problem.given)})"
        lines.append(f"- {problem.where}: {shorten(problem.message)}{given}")
    if len(problems) > _MAX_LISTED_ERRORS:
        lines.append(f"- ... and {len(problems) - _MAX_LISTED_ERRORS} more")
    lines.append(f"Schema: {_schema_text(target)}")
    return "\n".join(lines)


def _schema_text(target: Tool) -> str:
    return json.dumps(target.parameters, ensure_ascii=False)


def preview(value: Any) -> str:
    """A short, safe ``repr`` of something the model sent."""
    try:
        text = repr(value)
    except Exception:  # e.g. an int too large to print
        text = f"<{type(value).__name__}>"
    return shorten(text)


def shorten(text: str, limit: int = _PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004  # callable instances
    return call is not None and not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)

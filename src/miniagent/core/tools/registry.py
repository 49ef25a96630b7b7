"""Tools and the source of function tools: ``@tool``, :class:`Tool`, :class:`ToolRegistry`.

A tool is a plain typed Python function, or a JSON Schema with a function that takes the
arguments dict (:meth:`Tool.from_schema`). ``@tool`` derives a function's JSON Schema and an
arguments model once (see :mod:`miniagent.core.tools.schema`); a schema tool is checked with
:mod:`jsonschema` (see :mod:`miniagent.core.tools.schema_tool`). Every :class:`Tool` carries what
any source's tools carry: name, description, schema, arguments checker, timeout,
idempotency and approval rule.

A :class:`ToolRegistry` is the tool source of functions: :meth:`ToolRegistry.call_tool` runs
a validated call's function (sync ones on a worker thread). Validation, coercion, timeouts
and the error texts are the shared executor's (:class:`~miniagent.core.tools.toolbox.Toolbox`);
:meth:`ToolRegistry.execute` is that executor over this registry alone. It never raises
(except :class:`asyncio.CancelledError`): an unknown tool, broken or mistyped arguments, a
tool that raises or hangs, all become an :class:`~miniagent.core.types.Observation` with
``is_error=True`` whose text tells the model how to repair the call.

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
import copy
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, overload

from miniagent._internal.bounds import seconds
from miniagent._internal.limits import SlotKey
from miniagent.core.errors import ToolDefinitionError
from miniagent.core.retry import RetryPolicy, RetrySetting
from miniagent.core.tools.arguments import (
    NO_OUTPUT,
    ArgumentsChecker,
    FunctionArguments,
    format_result,
    preview,
)
from miniagent.core.tools.runner import (
    Failure,
    LateResult,
    describe,
    failure_text,
    is_async_callable,
    late_result,
    retryable_failure,
    run_function,
)
from miniagent.core.tools.schema import ToolSpec, build_tool_spec, check_tool_name
from miniagent.core.types import Observation, ToolCall

if TYPE_CHECKING:
    from miniagent.core.tool_context import ToolContext
    from miniagent.core.tools.toolbox import Toolbox

__all__ = ["NO_OUTPUT", "Tool", "ToolRegistry", "format_result", "tool"]

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
"""``requires_approval``: always, never, or a predicate on the call's arguments."""

WarmupFunction = Callable[[], Any]
"""``warmup``: a function with no arguments, sync or async (see
:mod:`miniagent.core.tools.warmup`)."""


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
            :mod:`miniagent._internal.limits`).
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
        timeout: float | None = None,
        idempotent: bool = False,
        requires_approval: ApprovalRule = False,
        retry: RetrySetting = None,
        warmup: WarmupFunction | None = None,
        max_concurrency: int | None = None,
        inline: bool = False,
    ) -> None:
        _check_timeout(timeout)
        _check_concurrency(max_concurrency)
        policy = RetryPolicy.of(retry)
        spec = build_tool_spec(fn, name=name, description=description)
        self.spec: ToolSpec | None = spec
        self._setup(spec.function, spec.name, spec.description, spec.parameters,
                    FunctionArguments(spec))
        self._set_options(timeout, idempotent, requires_approval, policy)
        self.warmup = _checked_warmup(spec.name, warmup)
        self.max_concurrency = max_concurrency
        self.inline = _checked_inline(self, inline)
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
        timeout: float | None = None,
        idempotent: bool = False,
        requires_approval: ApprovalRule = False,
        retry: RetrySetting = None,
        warmup: WarmupFunction | None = None,
        max_concurrency: int | None = None,
        inline: bool = False,
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
        _check_timeout(timeout)
        _check_concurrency(max_concurrency)
        policy = RetryPolicy.of(retry)
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
        self._set_options(timeout, idempotent, requires_approval, policy)
        self.warmup = _checked_warmup(name, warmup)
        self.max_concurrency = max_concurrency
        self.inline = _checked_inline(self, inline)
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

    def _set_options(self, timeout: float | None, idempotent: bool,
                     requires_approval: ApprovalRule, retry: RetryPolicy | None) -> None:
        self.timeout = None if timeout is None else float(timeout)
        self.idempotent = idempotent
        self.requires_approval = requires_approval
        self.retry = retry

    def with_options(self, *, name: str | None = None, timeout: float | None = None,
                     idempotent: bool | None = None,
                     requires_approval: ApprovalRule | None = None,
                     retry: RetrySetting = None, warmup: WarmupFunction | None = None,
                     max_concurrency: int | None = None, inline: bool | None = None) -> Tool:
        """A copy of this tool with other options (what the source wrappers list); ``None``
        keeps an option as it is."""
        if name is not None:
            check_tool_name(name)
        _check_timeout(timeout)
        _check_concurrency(max_concurrency)
        policy = RetryPolicy.of(retry)
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


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None:
        seconds("Tool timeout", timeout, error=ToolDefinitionError)


def _check_concurrency(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise ToolDefinitionError(
            f"Tool max_concurrency must be a positive integer, got {limit!r}.")


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
    retry: RetrySetting = None,
    warmup: WarmupFunction | None = None,
    max_concurrency: int | None = None,
    inline: bool = False,
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
    retry: RetrySetting = None,
    warmup: WarmupFunction | None = None,
    max_concurrency: int | None = None,
    inline: bool = False,
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
            process, within its ``timeout`` (see :mod:`miniagent.core.tools.warmup`).
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

    def wrap(target: Callable[..., Any]) -> Tool:
        if not isinstance(target, Tool):
            return Tool(
                target, name=name, description=description, timeout=timeout,
                idempotent=idempotent, requires_approval=requires_approval, retry=retry,
                warmup=warmup, max_concurrency=max_concurrency, inline=inline,
            )
        if name is None and description is None and timeout is None and retry is None and not (
            idempotent or requires_approval or warmup or max_concurrency or inline
        ):
            return target
        options: dict[str, Any] = {
            "name": name or target.name,
            "description": description if description is not None else target.description,
            "timeout": timeout if timeout is not None else target.timeout,
            "idempotent": idempotent or target.idempotent,
            "requires_approval": requires_approval or target.requires_approval,
            "retry": retry if retry is not None else target.retry,
            "warmup": warmup if warmup is not None else target.warmup,
            "max_concurrency": max_concurrency or target.max_concurrency,
            # a new tool: one given a timeout runs on a worker thread, where the timeout works
            "inline": inline or (target.inline and timeout is None),
        }
        if target.spec is None:
            return Tool.from_schema(parameters=target.parameters, fn=target.fn, **options)
        return Tool(target.fn, **options)

    return wrap if fn is None else wrap(fn)


class ToolRegistry:
    """Function and schema tools by name: the tool source of plain functions.

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

    def listed(self) -> list[Tool]:
        """The tools in registration order (what a run offers the model)."""
        return list(self._tools.values())

    def is_idempotent(self, name: str) -> bool:
        """Whether the tool called ``name`` may run again after a crash interrupted it."""
        target = self._tools.get(name)
        return target is not None and target.idempotent

    def openai_schemas(self) -> list[dict[str, Any]]:
        """Every tool in the OpenAI ``tools`` wire format, in registration order."""
        return [t.openai_schema() for t in self._tools.values()]

    # -- the tool source of functions -----------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        """Its tools, in registration order."""
        return self.listed()

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
        from miniagent.core.tools.warmup import tool_warmups, warm_all

        await warm_all(tool_warmups(self.listed()))

    async def aclose(self) -> None:
        """Nothing to release: function tools hold no resources."""

    def toolbox(self) -> Toolbox:
        """The shared executor over this registry alone (what a run of these tools uses)."""
        from miniagent.core.tools.toolbox import Toolbox

        return Toolbox((tool, self) for tool in self.listed())

    async def execute(self, call: ToolCall, context: ToolContext | None = None
                      ) -> Observation:
        """Validate and run one call (see :meth:`Toolbox.execute
        <miniagent.core.tools.toolbox.Toolbox.execute>`)."""
        return await self.toolbox().execute(call, context)

    async def execute_all(self, calls: list[ToolCall]) -> list[Observation]:
        """Run ``calls`` concurrently; the observations come back in call order."""
        toolbox = self.toolbox()
        return list(await asyncio.gather(*(toolbox.execute(call) for call in calls)))


@dataclasses.dataclass
class _Unshowable:
    """A result whose rendering raised (anything: ``SystemExit`` from a ``__str__`` too)."""

    error: BaseException


class _Observing:
    """Hands a driver's :data:`~miniagent.core.tools.runner.late_result` the observation of what
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

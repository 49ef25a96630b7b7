"""The context a call runs in: what a running tool may know about its call
(:func:`tool_context`), and who hears that a call waits for a slot (:func:`report_wait`).

A tool is a plain function, so it is not handed a context argument; a side-effecting tool that
needs an idempotency key (to make a payment or send a mail at most once across retries and
resumes) reads it here::

    @tool
    def send_mail(to: str, body: str) -> str:
        key = tool_context().idempotency_key   # the same on every attempt of this call

The step logic builds the context (it is pure data); the driver installs it around the call.
In process the key is ``session id:call id``, which a resumed session keeps; a Temporal worker
uses the workflow id and the activity id.

A process-wide throttle (:mod:`miniagent.core.throttles`) that makes a tool call or a model
request wait calls :func:`report_wait`; whoever runs the call installs a reporter around it with
:func:`reporting_waits`. The step logic installs one around each tool call and model call that
emits a ``slot_waiting`` event in the call's span, so the executor and the model report through
whatever driver runs them (a Temporal worker relays the report to its workflow). Like the tool
context, the reporter is a context variable: this module does no I/O and reads no clock, so the
step logic imports it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from miniagent.core.retry import RetryPolicy
from miniagent.core.types import Decision

__all__ = ["ToolContext", "WaitReporter", "current_reporter", "report_wait", "reporting_waits",
           "tool_context", "using_context"]

log = logging.getLogger("miniagent")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolContext:
    """The call being run: its session, step, call id, attempt and idempotency key (the same
    on every attempt; ``attempt`` counts them)."""

    session_id: str
    call_id: str
    tool: str
    step: int
    idempotency_key: str
    attempt: int = 1
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    decision: Decision | None = None
    """A person's decision on what this call's sub-run waited for (agents as tools)."""
    tokens_left: int | None = None
    """What is left of the run's token budget for this call (``None``: no budget); an agent
    used as a tool runs within it, so nesting cannot multiply a budget."""
    deadline: float | None = None
    """When the run's deadline passes (seconds since the epoch; ``None``: none)."""
    steps_left: int | None = None
    """This call's share of the model calls the run has left (``None``: not counted)."""
    default_retry: RetryPolicy | None = None
    """The run's retry policy for a tool that sets none (``Agent(tool_retry=...)``)."""

    @classmethod
    def for_call(cls, session_id: str, call_id: str, tool: str, step: int,
                 metadata: dict[str, Any] | None = None, *,
                 decision: Decision | None = None, tokens_left: int | None = None,
                 deadline: float | None = None, steps_left: int | None = None,
                 default_retry: RetryPolicy | None = None) -> ToolContext:
        return cls(session_id=session_id, call_id=call_id, tool=tool, step=step,
                   idempotency_key=f"{session_id}:{call_id}", metadata=dict(metadata or {}),
                   decision=decision, tokens_left=tokens_left, deadline=deadline,
                   steps_left=steps_left, default_retry=default_retry)


_CURRENT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "miniagent_tool_context", default=None)


def tool_context() -> ToolContext:
    """The context of the tool call running now; a clear error outside one."""
    context = _CURRENT.get()
    if context is None:
        raise LookupError("tool_context() is only available inside a tool call run by an agent")
    return context


def current_context() -> ToolContext | None:
    """The context of the tool call running now, or None."""
    return _CURRENT.get()


class using_context:  # a context manager, used like a function
    """Install ``context`` for the code run inside (tasks and worker threads started there
    inherit it). A class rather than a generator: it is entered around every tool call."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: ToolContext) -> None:
        self._context = context

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self._context)

    def __exit__(self, *exc_info: object) -> None:
        _CURRENT.reset(self._token)


# -- who hears that a call waits -------------------------------------------------------------------

WaitReporter = Callable[[str, str], None]
"""Called with ``(what, reason)`` when a call starts to wait: ``what`` is ``tool NAME`` or
``model NAME at URL``, ``reason`` says which limit holds it."""

_REPORTER: contextvars.ContextVar[WaitReporter | None] = contextvars.ContextVar(
    "miniagent_wait_reporter", default=None)


class reporting_waits:  # a context manager, used like a function
    """Have waits inside (tasks and threads started there too) reported to ``reporter``.

    A class rather than a generator: the step logic enters one around every model and tool
    call, and with no reporter to install where none is installed it does nothing at all.
    """

    __slots__ = ("_reporter", "_token")

    def __init__(self, reporter: WaitReporter | None) -> None:
        self._reporter = reporter
        self._token: contextvars.Token[WaitReporter | None] | None = None

    def __enter__(self) -> None:
        if self._reporter is not None or _REPORTER.get() is not None:
            self._token = _REPORTER.set(self._reporter)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is None:
            return
        # a coroutine closed from another context (a Temporal workflow evicted from the cache,
        # closed when collected) has nothing to restore there
        with contextlib.suppress(ValueError):
            _REPORTER.reset(self._token)


def current_reporter() -> WaitReporter | None:
    """The reporter installed here, if any."""
    return _REPORTER.get()


def report_wait(what: str, reason: str) -> None:
    """Tell the installed reporter (if any) that ``what`` waits, and why; never raises."""
    reporter = _REPORTER.get()
    if reporter is None:
        return
    try:
        reporter(what, reason)
    except Exception:  # a display must not stop a call
        log.exception("wait reporter failed on %s", what)

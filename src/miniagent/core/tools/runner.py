"""Running one tool call's work: a function awaited or in a worker thread, under a timeout.

The tool's own exceptions come back as a :class:`Failure` value, so a caller can tell them from
our own :class:`asyncio.TimeoutError`. That includes what does not derive from ``Exception``: a
tool's ``sys.exit()``, ``KeyboardInterrupt`` or its own ``CancelledError`` is the tool failing,
not the run being stopped. Only the caller's cancellation (the run's deadline, the run being
cancelled) cancels a call, and it takes effect at once even when the tool ignores it: the work
runs as a task of its own that is waited for (:func:`within`), never awaited directly, so a tool
that swallows its cancellation is left behind instead of holding up the run. The toolbox
(``toolbox.py``) puts every source's call under :func:`within`; the function source
(``registry.py``) runs its functions with :func:`run_function`.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from miniagent._internal.aio import run_in_daemon_thread
from miniagent.core.errors import ToolError

__all__ = ["Failure", "LateResult", "describe", "failure_text", "guarded", "is_async_callable",
           "late_result", "retryable_failure", "run_function", "run_with_timeout", "within"]


@dataclasses.dataclass
class Failure:
    """An exception raised by the tool itself (kept apart from our own timeout)."""

    error: BaseException


def _same(value: Any) -> Any:
    return value


async def run_with_timeout(
    fn: Callable[..., Any],
    is_async: bool,
    args: list[Any],
    kwargs: dict[str, Any],
    timeout: float | None,
) -> Any:
    """Run ``fn(*args, **kwargs)``; raises ``TimeoutError`` only for our own timeout.

    Sync tools run in a worker thread. Python cannot kill a thread, so on timeout we
    only stop waiting: the thread runs on until the function returns.
    """
    return await within(run_function(fn, is_async, args, kwargs), timeout)


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


def _call_sync(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
               render: Callable[[Any], Any]) -> Any:
    try:
        result = fn(*args, **kwargs)
        return _Pending(result) if inspect.isawaitable(result) else render(result)
    except BaseException as exc:  # a worker thread's or an inline call's: the tool's
        return Failure(exc)


def is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004  # callable instances
    return call is not None and not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


def failure_text(name: str, error: BaseException) -> str:
    if isinstance(error, ToolError):
        return str(error)
    return f"Error executing tool {name!r}: {describe(error)}"


def retryable_failure(error: BaseException, idempotent: bool) -> bool:
    """Whether what a tool raised is transient and safe to try again: the tool says so
    (``ToolError(..., retryable=True)``), or an idempotent tool met a connection error or a
    timeout of its own (whether a tool that is not idempotent had an effect is unknown)."""
    if isinstance(error, ToolError):
        return error.retryable
    return idempotent and isinstance(error, ConnectionError | TimeoutError)


def describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__

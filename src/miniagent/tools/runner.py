"""Running one tool function: awaited or in a worker thread, with a timeout.

The function's own exceptions come back as a :class:`Failure` value, so a caller can tell
them from our own :class:`asyncio.TimeoutError`. Split from ``registry.py``, which decides
what to run and turns the outcome into an observation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from miniagent.errors import ToolError
from miniagent.threads import run_in_daemon_thread

__all__ = ["Failure", "describe", "failure_text", "is_async_callable", "run_with_timeout"]


@dataclasses.dataclass
class Failure:
    """An exception raised by the tool itself (kept apart from our own timeout)."""

    error: Exception


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
    runner = _call_async(fn, args, kwargs) if is_async else _call_in_thread(fn, args, kwargs)
    if timeout is None:
        return await runner
    return await asyncio.wait_for(runner, timeout)


async def _call_async(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return await fn(*args, **kwargs)
    except Exception as exc:
        return Failure(exc)


async def _call_in_thread(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    result = await run_in_daemon_thread(_call_sync, fn, args, kwargs)
    if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
        try:
            return await result
        except Exception as exc:
            return Failure(exc)
    return result


def _call_sync(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        return Failure(exc)


def is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004  # callable instances
    return call is not None and not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


def failure_text(name: str, error: Exception) -> str:
    if isinstance(error, ToolError):
        return str(error)
    return f"Error executing tool {name!r}: {describe(error)}"


def describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__

"""Running blocking functions (sync tools, approval prompts) off the event loop.

Each call gets its own daemon thread instead of the loop's default executor: a thread that
never returns (a hung tool, a prompt nobody answers) cannot be killed, and with the default
executor ``asyncio.run`` and interpreter exit would wait for it forever. A daemon thread is
simply abandoned once nobody waits for its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``await`` the result of ``fn(*args)`` run in a new daemon thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(result: Any, error: BaseException | None) -> None:
        if future.done():  # the waiter was cancelled (tool timeout, run deadline)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting task, not lost in the thread
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(deliver, result, error)

    threading.Thread(target=work, name=f"miniagent-{getattr(fn, '__name__', 'call')}",
                     daemon=True).start()
    return await future

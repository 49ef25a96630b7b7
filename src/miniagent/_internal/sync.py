"""Running a coroutine to completion from synchronous code (``Agent.run``), boundedly.

Like :func:`asyncio.run`, with one difference: at the end, tasks still pending (a tool that
ignores its cancellation, left behind by a deadline) get :data:`LEFTOVER_GRACE` seconds to
finish after being cancelled, instead of being waited for without end. As in ``asyncio.run``,
Ctrl-C cancels the main task (so cleanup code runs) and then raises KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

LEFTOVER_GRACE = 1.0
"""Seconds pending tasks get to finish once the main coroutine has returned."""


def run_coroutine(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` in a new event loop and close the loop within a bounded time."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    interrupted = False

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        loop.call_soon_threadsafe(task.cancel)

    try:
        with _sigint_handler(on_sigint):
            try:
                return loop.run_until_complete(task)
            except asyncio.CancelledError:
                if interrupted:
                    raise KeyboardInterrupt from None
                raise
    finally:
        try:
            _settle_leftovers(loop)
        finally:
            loop.close()


def _settle_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for leftover in pending:
        leftover.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=LEFTOVER_GRACE))
    for leftover in pending:
        if not leftover.done():
            # abandoned on purpose: do not report it as "destroyed but pending" later
            leftover._log_destroy_pending = False  # type: ignore[attr-defined]
    loop.run_until_complete(loop.shutdown_asyncgens())


@contextlib.contextmanager
def _sigint_handler(handler: Any) -> Iterator[None]:
    """Install ``handler`` for SIGINT while in the main thread with the default handler."""
    usable = (threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if not usable:
        yield
        return
    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)

"""Reporting that a call waits for a slot: the seam between the limits and the events.

A limit (:mod:`miniagent._internal.throttles`) that makes a tool call or a model request wait calls
:func:`report_wait`; whoever runs the call installs a reporter around it with
:func:`reporting_waits`. The step logic installs one around each tool call and model call that
emits a ``slot_waiting`` event in the call's span, so the executor and the model report through
whatever driver runs them (a Temporal worker relays the report to its workflow). This module
does no I/O and reads no clock: the step logic imports it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable

__all__ = ["WaitReporter", "current_reporter", "report_wait", "reporting_waits"]

log = logging.getLogger("miniagent")

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

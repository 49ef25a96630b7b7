"""What spans and metrics share on their way to an OTLP/HTTP collector.

The span side (:mod:`.otlp_spans`) and the metric side (:mod:`.otlp_metrics`) wrap the SDK's
OTLP/HTTP exporters and providers with the same three changes, written here once:

- :func:`collector_url`: the URL is checked (http or https, with a host) before anything is
  built, and a wrong one is a :class:`~miniagent.core.errors.ConfigError`.
- :class:`Sender`: the exporter's own log records (a warning per retry, an error per lost
  batch) are held back while one of our exports runs; the first failure of the process, spans
  or metrics, is said in one line on the ``miniagent`` logger, with the collector's address
  (redacted) and the reason. Later failures are not repeated. After :meth:`Sender.stop`
  nothing more is sent.
- :class:`BoundedShutdown`: a provider whose shutdown (its last export, which the exporter
  retries) waits at most ``shutdown_timeout`` seconds; past it the exporter is stopped, which
  ends its retries against a collector that is down. A request already on the wire still ends
  within the exporter's ``timeout``: nothing can cut a blocking HTTP request short.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast
from urllib.parse import SplitResult, urlsplit

from miniagent.core.errors import ConfigError
from miniagent.core.trace.cut import cut_text
from miniagent.core.trace.redact import REDACTED, redact_url

__all__ = ["SHUTDOWN_TIMEOUT", "BoundedShutdown", "Sender", "collector_url", "shut_down_within"]

SHUTDOWN_TIMEOUT = 1.0
"""Seconds the exit gives the last export: a live collector answers within milliseconds, and
the exporter's first retry comes after about a second."""

_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                     "opentelemetry.exporter.otlp.proto.http.metric_exporter",
                     "opentelemetry.exporter.otlp.common.http")
_log = logging.getLogger(__name__)

Result = TypeVar("Result")


def collector_url(url: str) -> SplitResult:
    """``url`` split, once it is known to be an http(s) URL with a host.

    Raises:
        ConfigError: it is not.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--otlp needs an http(s) URL such as http://127.0.0.1:4318, "
                          f"got {url!r}")
    return parts


class _HeldBack(logging.Filter):
    """Keeps the exporter's records off stderr while one of our exports runs, remembering the
    first reason (per thread: the exporting thread is the one that logs). The records of any
    other exporter in the process pass."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(self._local, "holding", False):
            return True  # not one of our exports
        if getattr(self._local, "reason", None) is None:
            self._local.reason = _reason(record)
        return False

    def hold(self) -> None:
        self._local.holding, self._local.reason = True, None

    def take(self) -> str | None:
        """Stop holding; the first reason held back, if any."""
        reason, self._local.reason = getattr(self._local, "reason", None), None
        self._local.holding = False
        return reason


def _reason(record: logging.LogRecord) -> str:
    """The error a record is about (a connection error, ``code: 413, reason: ...``), on one
    line."""
    args = record.args if isinstance(record.args, tuple) else ()
    errors = [arg for arg in args if isinstance(arg, BaseException)]
    text = str(errors[0]) if errors else record.getMessage()
    return cut_text(" ".join(text.split()), 400)


_HELD_BACK = _HeldBack()
_reported = threading.Lock()  # held for good by the one report of the process


def _hold_back_exporter_logs() -> None:
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _HELD_BACK not in logger.filters:
            logger.addFilter(_HELD_BACK)


class Sender:
    """Runs one exporter's sends: none after :meth:`stop`, the SDK's log records held back,
    the first failure of the process said once.

    Args:
        endpoint: The collector's URL the exporter sends to.
        signal: What is sent, in the failure's line (``spans``, ``metrics``).
        unit: What is counted as dropped (``span``, ``data point``).
        hint: Said after the failure's line.
    """

    def __init__(self, endpoint: str, *, signal: str, unit: str, hint: str = "") -> None:
        self.endpoint, self.signal, self.unit, self.hint = endpoint, signal, unit, hint
        self._stopped = threading.Event()
        _hold_back_exporter_logs()

    def send(self, export: Callable[[], Result], *, count: int, success: Result,
             failure: Result) -> Result:
        """``export()``'s result, or ``failure`` without calling it once stopped; a result
        that is not ``success`` is said (if it is the process's first failure), with ``count``
        items dropped."""
        if self._stopped.is_set():  # past the shutdown timeout: what is left is dropped
            return failure
        _HELD_BACK.hold()
        try:
            result = export()
        finally:
            reason = _HELD_BACK.take()
        if result is not success:
            self._report_once(reason, count)
        return result

    def stop(self, shutdown: Callable[[], object]) -> None:
        """Send nothing more, and call the SDK exporter's ``shutdown`` (once), which also ends
        a retry it is waiting to make."""
        if not self._stopped.is_set():
            self._stopped.set()
            shutdown()

    def _report_once(self, reason: str | None, count: int) -> None:
        if not _reported.acquire(blocking=False):
            return
        reason = reason or "no answer"
        query = urlsplit(self.endpoint).query
        if query:  # a token in the URL's query may be quoted in the reason
            reason = reason.replace(query, REDACTED)
        _log.warning("OpenTelemetry %s could not be sent to the collector at %s (%s): %d "
                     "%s(s) dropped; later failures to send are not reported%s",
                     self.signal, redact_url(self.endpoint), reason, count, self.unit,
                     self.hint)


class _Shuts(Protocol):
    def shutdown(self, *args: Any, **kwargs: Any) -> Any: ...


class BoundedShutdown:
    """A provider (put this class first among its bases) whose ``shutdown`` waits at most
    ``shutdown_timeout`` seconds for its last export, then stops the exporter (:meth:`bound`
    says which, as the provider is built)."""

    _stop_exporter: Callable[[], object]
    _shutdown_timeout: float = SHUTDOWN_TIMEOUT

    def bound(self, stop_exporter: Callable[[], object], timeout: float | None) -> None:
        """Stop with ``stop_exporter`` past ``timeout`` seconds (None: :data:`SHUTDOWN_TIMEOUT`)."""
        self._stop_exporter = stop_exporter
        self._shutdown_timeout = SHUTDOWN_TIMEOUT if timeout is None else timeout

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        provider = cast(_Shuts, super())
        shut_down_within(lambda: provider.shutdown(*args, **kwargs), self._stop_exporter,
                         self._shutdown_timeout)


def shut_down_within(shutdown: Callable[[], object], stop_exporter: Callable[[], object],
                     timeout: float) -> None:
    """Run a provider's ``shutdown`` (its last export, which the exporter retries for up to its
    own timeout); past ``timeout`` seconds, call ``stop_exporter``, which ends its retries."""
    stop = threading.Timer(timeout, stop_exporter)
    stop.daemon = True
    stop.start()
    try:
        shutdown()
    finally:
        stop.cancel()

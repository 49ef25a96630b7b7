"""Spans to an OTLP/HTTP collector: requests of bounded size, one line when sending fails.

:func:`otlp_provider` builds the SDK's tracer provider, batch span processor and OTLP/HTTP
(protobuf) exporter, with three changes to what they do alone:

- A batch goes out as requests of at most ``max_request_bytes`` (estimated from the spans'
  texts), so a collector or proxy that refuses a large request (413) loses that part only,
  never the whole batch; a span larger than that on its own is sent alone.
- The exporter's own log records (a warning per retry, an error per lost batch) are held back;
  the first failure of the process is said in one line on the ``miniagent`` logger, with the
  collector's address and the reason. Later failures are not repeated.
- At shutdown, the last export waits at most ``shutdown_timeout`` seconds before the exporter
  is shut down, which ends its retries against a collector that is down; a request already on
  the wire still ends within the exporter's ``timeout``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from miniagent.core.errors import ConfigError
from miniagent.observe.cut import cut_text
from miniagent.observe.redact import REDACTED, redact_url

__all__ = ["MAX_REQUEST_BYTES", "SHUTDOWN_TIMEOUT", "otlp_provider"]

MAX_REQUEST_BYTES = 1_000_000
"""Under the 1 MiB that nginx, a common proxy in front of collectors, accepts by default;
a span whose texts are cut to 64 Ki characters fits in it."""
SHUTDOWN_TIMEOUT = 1.0
"""Seconds the exit gives the last export: a live collector answers within milliseconds, and
the exporter's first retry comes after about a second."""

_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                     "opentelemetry.exporter.otlp.proto.http.metric_exporter",
                     "opentelemetry.exporter.otlp.common.http")
_log = logging.getLogger(__name__)


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


def _report_once(endpoint: str, reason: str | None, count: int, *, signal: str = "spans",
                 unit: str = "span", hint: str = "") -> None:
    """Say the first failure to send spans or metrics of the process; later ones are not."""
    if not _reported.acquire(blocking=False):
        return
    reason = reason or "no answer"
    query = urlsplit(endpoint).query
    if query:  # a token in the URL's query may be quoted in the reason
        reason = reason.replace(query, REDACTED)
    _log.warning("OpenTelemetry %s could not be sent to the collector at %s (%s): %d "
                 "%s(s) dropped; later failures to send are not reported%s",
                 signal, redact_url(endpoint), reason, count, unit, hint)


def _text_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, (list, tuple)):
        return sum(_text_bytes(item) for item in value)
    return 8


def _span_bytes(span: ReadableSpan) -> int:
    """About what ``span`` takes in a request, on the high side: its texts in UTF-8, and room
    for ids, times and each attribute's framing."""
    maps: list[Mapping[str, Any] | None] = [span.attributes]
    maps += [event.attributes for event in span.events]
    maps += [link.attributes for link in span.links]
    size = 160 + _text_bytes(span.name) + _text_bytes(span.status.description or "")
    for attributes in maps:
        size += sum(24 + _text_bytes(key) + _text_bytes(value)
                    for key, value in (attributes or {}).items())
    return size


def _parts(spans: Sequence[ReadableSpan], budget: int) -> Iterator[list[ReadableSpan]]:
    part: list[ReadableSpan] = []
    size = 0
    for span in spans:
        span_size = _span_bytes(span)
        if part and size + span_size > budget:
            yield part
            part, size = [], 0
        part.append(span)
        size += span_size
    if part:
        yield part


class _Exporter(SpanExporter):
    """The OTLP exporter, sent batches in parts of bounded size, its failures said once."""

    def __init__(self, inner: SpanExporter, *, endpoint: str, max_request_bytes: int) -> None:
        self.inner, self.endpoint, self.max_request_bytes = inner, endpoint, max_request_bytes
        self._shut = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        results = [self._send(part) for part in _parts(spans, self.max_request_bytes)]
        ok = all(result is SpanExportResult.SUCCESS for result in results)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def _send(self, part: list[ReadableSpan]) -> SpanExportResult:
        if self._shut.is_set():  # past the shutdown timeout: what is left is dropped
            return SpanExportResult.FAILURE
        _HELD_BACK.hold()
        try:
            result = self.inner.export(part)
        finally:
            reason = _HELD_BACK.take()
        if result is not SpanExportResult.SUCCESS:
            _report_once(self.endpoint, reason, len(part))
        return result

    def shutdown(self) -> None:
        if not self._shut.is_set():
            self._shut.set()
            self.inner.shutdown()  # also ends a retry the exporter is waiting to make

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Provider(TracerProvider):
    """A tracer provider whose shutdown waits at most ``shutdown_timeout`` for the collector."""

    def __init__(self, exporter: _Exporter, shutdown_timeout: float, **options: Any) -> None:
        super().__init__(**options)
        self._exporter, self._shutdown_timeout = exporter, shutdown_timeout

    def shutdown(self) -> None:
        # The batch processor waits up to 30 s for its last export
        shut_down_within(super().shutdown, self._exporter.shutdown, self._shutdown_timeout)


def shut_down_within(shutdown: Callable[[], object], stop_exporter: Callable[[], object],
                     timeout: float) -> None:
    """Run a provider's ``shutdown`` (its last export, which the exporter retries for up to its
    own timeout); past ``timeout`` seconds, stop the exporter instead, which ends its retries.
    A request already on the wire (a collector that accepted it and does not answer) still ends
    within the exporter's ``timeout``: nothing can cut a blocking HTTP request short."""
    stop = threading.Timer(timeout, stop_exporter)
    stop.daemon = True
    stop.start()
    try:
        shutdown()
    finally:
        stop.cancel()


def otlp_provider(url: str, *, service_name: str = "miniagent", timeout: float = 5.0,
                  max_request_bytes: int = MAX_REQUEST_BYTES,
                  shutdown_timeout: float = SHUTDOWN_TIMEOUT) -> TracerProvider:
    """A tracer provider that batches spans to an OTLP/HTTP collector at ``url`` (see the
    module docstring; :func:`miniagent.observe.otel.otlp_provider` documents the arguments).

    Raises:
        ConfigError: ``url`` is not an http(s) URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--otlp needs an http(s) URL such as http://127.0.0.1:4318, "
                          f"got {url!r}")
    endpoint = url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/traces"
    _hold_back_exporter_logs()
    exporter = _Exporter(OTLPSpanExporter(endpoint=endpoint, timeout=timeout),
                         endpoint=endpoint, max_request_bytes=max_request_bytes)
    provider = _Provider(exporter, shutdown_timeout,
                         resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider

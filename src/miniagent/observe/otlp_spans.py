"""Spans to an OTLP/HTTP collector, in requests of bounded size.

:func:`otlp_provider` builds the SDK's tracer provider, batch span processor and OTLP/HTTP
(protobuf) exporter, with what both signals' exports do (:mod:`.otlp_export`: the exporter's
log records held back, the first failure of the process said in one line, a shutdown that
waits at most ``shutdown_timeout`` seconds for a collector that is down), and one more change:
a batch goes out as requests of at most ``max_request_bytes`` (estimated from the spans'
texts), so a collector or proxy that refuses a large request (413) loses that part only,
never the whole batch; a span larger than that on its own is sent alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from miniagent.observe.otlp_export import BoundedShutdown, Sender, collector_url

__all__ = ["MAX_REQUEST_BYTES", "otlp_provider"]

MAX_REQUEST_BYTES = 1_000_000
"""Under the 1 MiB that nginx, a common proxy in front of collectors, accepts by default;
a span whose texts are cut to 64 Ki characters fits in it."""


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
        self.inner, self.max_request_bytes = inner, max_request_bytes
        self.sender = Sender(endpoint, signal="spans", unit="span")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        results = [self.sender.send(partial(self.inner.export, part), count=len(part),
                                    success=SpanExportResult.SUCCESS,
                                    failure=SpanExportResult.FAILURE)
                   for part in _parts(spans, self.max_request_bytes)]
        ok = all(result is SpanExportResult.SUCCESS for result in results)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.sender.stop(self.inner.shutdown)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Provider(BoundedShutdown, TracerProvider):
    """A tracer provider whose shutdown waits at most ``shutdown_timeout`` for the collector
    (the batch processor alone waits up to 30 s for its last export)."""


def otlp_provider(url: str, *, service_name: str = "miniagent", timeout: float = 5.0,
                  max_request_bytes: int | None = None,
                  shutdown_timeout: float | None = None) -> TracerProvider:
    """A tracer provider that batches spans to an OTLP/HTTP collector at ``url`` (see the
    module docstring; :func:`miniagent.observe.otel.otlp_provider` documents the arguments).

    Raises:
        ConfigError: ``url`` is not an http(s) URL.
    """
    parts = collector_url(url)
    endpoint = url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/traces"
    exporter = _Exporter(OTLPSpanExporter(endpoint=endpoint, timeout=timeout),
                         endpoint=endpoint, max_request_bytes=MAX_REQUEST_BYTES
                         if max_request_bytes is None else max_request_bytes)
    provider = _Provider(resource=Resource.create({"service.name": service_name}))
    provider.bound(exporter.shutdown, shutdown_timeout)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider

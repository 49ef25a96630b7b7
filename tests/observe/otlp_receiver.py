"""A real OTLP/HTTP receiver on 127.0.0.1 for tests: it decodes what exporters send.

``POST /v1/traces`` with an ``ExportTraceServiceRequest`` (protobuf, optionally gzip) is
decoded with the opentelemetry-proto package; each span is kept as a plain
:class:`ReceivedSpan` (ids as hex, attributes as Python values). ``POST /v1/metrics`` with an
``ExportMetricsServiceRequest`` likewise: each data point is kept as a :class:`ReceivedPoint`.
``max_body`` makes it answer 413, as a collector or its proxy does, to a larger request (its
size is kept all the same); ``metrics=False`` answers 404 to metrics, as a collector that takes
spans only does.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass
class ReceivedPoint:
    """One data point of a metric: ``value`` for a sum or a gauge; ``count``, ``sum`` and the
    buckets for a histogram."""

    name: str
    unit: str
    kind: str
    """``sum``, ``gauge`` or ``histogram``."""
    attributes: dict[str, Any]
    value: float = 0.0
    monotonic: bool = False
    count: int = 0
    sum: float = 0.0
    bounds: list[float] = field(default_factory=list)
    buckets: list[int] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


@dataclass
class Receiver:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    posts: list[str] = field(default_factory=list)
    """The content type of each POST received."""
    sizes: list[int] = field(default_factory=list)
    """The body size of each POST received (refused ones too)."""

    points: list[ReceivedPoint] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    """The path of each POST received."""

    def named(self, prefix: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def latest(self, name: str, **attributes: Any) -> list[ReceivedPoint]:
        """The points of metric ``name`` whose attributes include ``attributes``, from the
        last request that had that metric (cumulative points: the latest hold the totals)."""
        last: dict[tuple[Any, ...], ReceivedPoint] = {}
        for point in self.points:
            if point.name == name and attributes.items() <= point.attributes.items():
                last[tuple(sorted(point.attributes.items()))] = point
        return list(last.values())

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of the latest values (a histogram: counts) of ``name`` whose attributes
        include ``attributes``."""
        return sum(p.count if p.kind == "histogram" else p.value
                   for p in self.latest(name, **attributes))


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


def _decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(), kind=span.kind,
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes), status_code=span.status.code,
                    events=[(e.name, _attributes(e.attributes)) for e in span.events],
                    resource=resource))
    return spans


def _number(point: Any) -> float:
    return float(point.as_int if point.WhichOneof("value") == "as_int" else point.as_double)


def _decode_metrics(body: bytes) -> list[ReceivedPoint]:
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    points = []
    for resource_metrics in request.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                base = dict(name=metric.name, unit=metric.unit, kind=kind, resource=resource,
                            scope=scope_metrics.scope.name)
                data = getattr(metric, kind)
                for point in data.data_points:
                    attributes = _attributes(point.attributes)
                    if kind == "histogram":
                        points.append(ReceivedPoint(
                            **base, attributes=attributes, count=point.count, sum=point.sum,
                            bounds=list(point.explicit_bounds),
                            buckets=list(point.bucket_counts)))
                    else:
                        points.append(ReceivedPoint(
                            **base, attributes=attributes, value=_number(point),
                            monotonic=kind == "sum" and data.is_monotonic))
    return points


@contextmanager
def otlp_receiver(max_body: int | None = None, *, metrics: bool = True) -> Iterator[Receiver]:
    """A receiver on a free port of 127.0.0.1, stopped on exit."""
    received: list[ReceivedSpan] = []
    points: list[ReceivedPoint] = []
    posts: list[str] = []
    paths: list[str] = []
    sizes: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            sizes.append(len(body))
            if max_body is not None and len(body) > max_body:
                self.send_error(413)
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            paths.append(self.path)
            if self.path == "/v1/metrics" and metrics:
                points.extend(_decode_metrics(body))
                answer = ExportMetricsServiceResponse().SerializeToString()
            elif self.path == "/v1/traces":
                posts.append(self.headers.get("Content-Type", ""))
                received.extend(_decode(body))
                answer = ExportTraceServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}")
        receiver.spans, receiver.posts, receiver.sizes = received, posts, sizes
        receiver.points, receiver.paths = points, paths
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

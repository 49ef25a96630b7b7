"""Metrics to an OTLP/HTTP collector, sent as spans are (:mod:`miniagent.observe.otlp_spans`).

:func:`otlp_meter_provider` builds the SDK's meter provider with a periodic reader and the
OTLP/HTTP (protobuf) metric exporter, with the span exporter's two changes: the exporter's own
log records are held back and the first failure of the process (spans or metrics) is one line
on the ``miniagent`` logger; and at shutdown the last export waits at most
``shutdown_timeout`` seconds before the exporter is shut down, ending its retries against a
collector that is down; a request already on the wire (a collector that accepted it and does
not answer) still ends within the exporter's ``timeout``.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from miniagent.core.errors import ConfigError
from miniagent.observe.otlp_spans import (
    _HELD_BACK,
    SHUTDOWN_TIMEOUT,
    _hold_back_exporter_logs,
    _report_once,
    shut_down_within,
)

__all__ = ["metrics_endpoint", "otlp_meter_provider"]

_HINT = ("; a collector that takes spans only (Jaeger, Phoenix, Langfuse) refuses metrics: "
         "OTEL_METRICS_EXPORTER=none sends spans alone")


def metrics_endpoint(url: str) -> str:
    """The metrics endpoint of ``url``: a base URL gets ``/v1/metrics``, a traces endpoint
    (``.../v1/traces``) becomes ``.../v1/metrics``, any other path is kept.

    Example:
        >>> metrics_endpoint("http://127.0.0.1:4318/v1/traces")
        'http://127.0.0.1:4318/v1/metrics'

    Raises:
        ConfigError: ``url`` is not an http(s) URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--otlp needs an http(s) URL such as http://127.0.0.1:4318, "
                          f"got {url!r}")
    path = parts.path.rstrip("/")
    if path in ("", "/v1/traces") or path.endswith("/v1/traces"):
        path = path.removesuffix("/v1/traces") + "/v1/metrics"
    return parts._replace(path=path).geturl()


def _points(data: MetricsData) -> int:
    return sum(len(metric.data.data_points) for resource in data.resource_metrics
               for scope in resource.scope_metrics for metric in scope.metrics)


class _Exporter(MetricExporter):
    """The OTLP metric exporter, its failures said once."""

    def __init__(self, inner: OTLPMetricExporter, *, endpoint: str) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self.inner, self.endpoint = inner, endpoint
        self._shut = threading.Event()

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        if self._shut.is_set():  # past the shutdown timeout: what is left is dropped
            return MetricExportResult.FAILURE
        _HELD_BACK.hold()
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis)
        finally:
            reason = _HELD_BACK.take()
        if result is not MetricExportResult.SUCCESS:
            _report_once(self.endpoint, reason, _points(metrics_data), signal="metrics",
                         unit="data point", hint=_HINT)
        return result

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        if not self._shut.is_set():
            self._shut.set()
            self.inner.shutdown()  # also ends a retry the exporter is waiting to make

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Provider(MeterProvider):
    """A meter provider whose shutdown waits at most ``shutdown_timeout`` for the collector."""

    def __init__(self, exporter: _Exporter, shutdown_timeout: float, **options: Any) -> None:
        super().__init__(**options)
        self._exporter, self._shutdown_timeout = exporter, shutdown_timeout

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        # the reader's last collection exports once more
        shut_down_within(lambda: super(_Provider, self).shutdown(timeout_millis),
                         self._exporter.shutdown, self._shutdown_timeout)


def otlp_meter_provider(url: str, *, service_name: str = "miniagent", timeout: float = 5.0,
                        interval: float | None = None,
                        shutdown_timeout: float | None = None) -> MeterProvider:
    """A meter provider exporting to an OTLP/HTTP collector at ``url`` every ``interval``
    seconds and at shutdown (see :func:`miniagent.observe.metrics.otlp_meter_provider`).

    Raises:
        ConfigError: ``url`` is not an http(s) URL, or the export interval is not above 0.
    """
    endpoint = metrics_endpoint(url)
    _hold_back_exporter_logs()
    exporter = _Exporter(OTLPMetricExporter(endpoint=endpoint, timeout=timeout),
                         endpoint=endpoint)
    try:
        reader = PeriodicExportingMetricReader(
            exporter, export_interval_millis=None if interval is None else interval * 1000)
    except ValueError:  # the SDK refuses an interval that is not above 0
        given = (f"OTEL_METRIC_EXPORT_INTERVAL={os.environ.get('OTEL_METRIC_EXPORT_INTERVAL')!r}"
                 if interval is None else f"interval={interval!r}")
        raise ConfigError(f"the metrics' export interval must be above 0, got {given}"
                          ) from None
    return _Provider(exporter, SHUTDOWN_TIMEOUT if shutdown_timeout is None
                     else shutdown_timeout, metric_readers=[reader],
                     resource=Resource.create({"service.name": service_name}))

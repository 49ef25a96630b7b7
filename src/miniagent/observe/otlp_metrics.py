"""Metrics to an OTLP/HTTP collector, sent as spans are (:mod:`miniagent.observe.otlp_spans`).

:func:`otlp_meter_provider` builds the SDK's meter provider with a periodic reader and the
OTLP/HTTP (protobuf) metric exporter, with what both signals' exports do
(:mod:`.otlp_export`): the exporter's own log records are held back and the first failure of
the process (spans or metrics) is one line on the ``miniagent`` logger; and at shutdown the
last export waits at most ``shutdown_timeout`` seconds before the exporter is shut down,
ending its retries against a collector that is down.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

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
from miniagent.observe.otlp_export import BoundedShutdown, Sender, collector_url

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
    parts = collector_url(url)
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
        self.inner = inner
        self.sender = Sender(endpoint, signal="metrics", unit="data point", hint=_HINT)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        return self.sender.send(
            partial(self.inner.export, metrics_data, timeout_millis=timeout_millis),
            count=_points(metrics_data), success=MetricExportResult.SUCCESS,
            failure=MetricExportResult.FAILURE)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.sender.stop(self.inner.shutdown)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Provider(BoundedShutdown, MeterProvider):
    """A meter provider whose shutdown (the reader's last collection exports once more) waits
    at most ``shutdown_timeout`` for the collector."""


def otlp_meter_provider(url: str, *, service_name: str = "miniagent", timeout: float = 5.0,
                        interval: float | None = None,
                        shutdown_timeout: float | None = None) -> MeterProvider:
    """A meter provider exporting to an OTLP/HTTP collector at ``url`` every ``interval``
    seconds and at shutdown (see :func:`miniagent.observe.metrics.otlp_meter_provider`).

    Raises:
        ConfigError: ``url`` is not an http(s) URL, or the export interval is not above 0.
    """
    endpoint = metrics_endpoint(url)
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
    provider = _Provider(metric_readers=[reader],
                         resource=Resource.create({"service.name": service_name}))
    provider.bound(exporter.shutdown, shutdown_timeout)
    return provider

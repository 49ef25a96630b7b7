"""``--trace FILE``, ``--otlp URL`` and ``--metrics HOST:PORT`` of ``miniagent run``: subscribers
for one agent's runs.

``--otlp`` sends metrics as well as spans, to the same collector (``/v1/metrics`` beside
``/v1/traces``), as OpenTelemetry's own exporters do with one endpoint;
``OTEL_METRICS_EXPORTER=none`` leaves the metrics out, for a collector that takes spans only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from miniagent.core.agent import Agent
from miniagent.core.models.describe import describe_model
from miniagent.core.trace.redact import model_secrets

if TYPE_CHECKING:
    from miniagent.temporal.agent import TemporalAgent

TraceOption = Annotated[Path | None, typer.Option(
    "--trace", help="Append every event to this JSONL file (credentials redacted); read it "
    "with 'miniagent trace show|html'.")]
OtlpOption = Annotated[str | None, typer.Option(
    "--otlp", help="Export OpenTelemetry spans and metrics over OTLP/HTTP to this collector URL, "
    "e.g. http://127.0.0.1:4318 (extra 'otel'; OTEL_METRICS_EXPORTER=none: spans only).")]
WorkerOtlpOption = Annotated[str | None, typer.Option(
    "--otlp", help="Export OpenTelemetry metrics of the model and tool calls made here over "
    "OTLP/HTTP to this collector URL, e.g. http://127.0.0.1:4318 (extra 'otel').")]
OtlpContentOption = Annotated[bool, typer.Option(
    "--otlp-content", help="Include messages, tool arguments and results in the spans "
    "(redacted).")]
MetricsOption = Annotated[str | None, typer.Option(
    "--metrics", metavar="HOST:PORT", help="Serve Prometheus metrics of the runs on "
    "http://HOST:PORT/metrics while this command runs, e.g. 127.0.0.1:9464 (extra 'metrics'); "
    "a scrape by DNS name needs that name in MINIAGENT_METRICS_HOSTS (comma-separated).")]


@contextmanager
def observing(agent: Agent | TemporalAgent, *, trace: Path | None, otlp: str | None,
              otlp_content: bool = False, secrets: Iterable[str] = (),
              metrics: str | None = None) -> Iterator[None]:
    """Subscribe a JSONL tracer, OpenTelemetry spans and/or Prometheus metrics (served on
    ``metrics``, HOST:PORT); flush and close them at the end.

    ``secrets`` (MCP header values, ...) are redacted along with the model's API key.
    """
    info, secrets = describe_model(agent.model), [*model_secrets(agent.model), *secrets]
    closers: list[Any] = []
    if trace is not None:
        from miniagent.core.trace.jsonl import JsonlTracer

        tracer = JsonlTracer(trace, secrets=secrets, model=info.name or None)
        agent.subscribe(tracer)
        closers.append(tracer.close)
    meter_provider = None
    if otlp is not None:
        from miniagent.observe.otel import OtelTracer, otlp_provider

        provider = otlp_provider(otlp)
        agent.subscribe(OtelTracer(model=info, tracer_provider=provider, secrets=secrets,
                                   capture_content=otlp_content or None))
        closers.append(provider.shutdown)  # sends what is still batched
        meter_provider = otlp_meters(otlp)
        if meter_provider is not None:
            closers.append(meter_provider.shutdown)  # sends the last figures
    try:
        # a TemporalAgent's decisions are made in the cluster, not in a store
        store = agent.store if isinstance(agent, Agent) else None
        with serving_metrics(agent.model, metrics, meter_provider, store=store) as counting:
            if counting is not None:
                agent.subscribe(counting)
            yield
    finally:
        for close in closers:
            close()


def otlp_meters(url: str | None) -> Any:
    """A meter provider sending to ``url`` (:func:`~miniagent.observe.metrics.
    otlp_meter_provider`); None without a URL or with ``OTEL_METRICS_EXPORTER=none``."""
    if url is None or os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "none":
        return None
    from miniagent.observe.metrics import otlp_meter_provider

    return otlp_meter_provider(url)


@contextmanager
def serving_metrics(model: Any, address: str | None, meter_provider: Any = None, *,
                    store: Any = None) -> Iterator[Any]:
    """A :class:`~miniagent.observe.metrics.Metrics` of ``model``'s calls served on
    ``address`` (HOST:PORT) until the end and/or recorded by ``meter_provider`` (the caller
    shuts it down); None when neither is given. ``store``: where the approval gauges see
    decisions made by other processes."""
    if address is None and meter_provider is None:
        yield None
        return
    from miniagent.observe.metrics import Metrics
    from miniagent.observe.metrics_prom import new_registry

    metrics = Metrics(model=describe_model(model), meter_provider=meter_provider,
                      registry=new_registry() if address is not None else None, store=store)
    if address is None:
        yield metrics
        return
    hosts = os.environ.get("MINIAGENT_METRICS_HOSTS", "").split(",")  # names it is scraped by
    with metrics.serve(address, hosts=hosts):  # a bad address is said before anything runs
        yield metrics

"""``--trace FILE``, ``--otlp URL`` and ``--metrics HOST:PORT`` of ``miniagent run``: subscribers
for one agent's runs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from miniagent.agent import Agent
from miniagent.observe.describe import describe_model
from miniagent.observe.redact import model_secrets

TraceOption = Annotated[Path | None, typer.Option(
    "--trace", help="Append every event to this JSONL file (credentials redacted); read it "
    "with 'miniagent trace show|html'.")]
OtlpOption = Annotated[str | None, typer.Option(
    "--otlp", help="Export OpenTelemetry spans over OTLP/HTTP to this collector URL, e.g. "
    "http://127.0.0.1:4318 (extra 'otel').")]
OtlpContentOption = Annotated[bool, typer.Option(
    "--otlp-content", help="Include messages, tool arguments and results in the spans "
    "(redacted).")]
MetricsOption = Annotated[str | None, typer.Option(
    "--metrics", metavar="HOST:PORT", help="Serve Prometheus metrics of the runs on "
    "http://HOST:PORT/metrics while this command runs, e.g. 127.0.0.1:9464 (extra 'metrics').")]


@contextmanager
def observing(agent: Agent, *, trace: Path | None, otlp: str | None,
              otlp_content: bool = False, secrets: Iterable[str] = (),
              metrics: str | None = None) -> Iterator[None]:
    """Subscribe a JSONL tracer, OpenTelemetry spans and/or Prometheus metrics (served on
    ``metrics``, HOST:PORT); flush and close them at the end.

    ``secrets`` (MCP header values, ...) are redacted along with the model's API key.
    """
    info, secrets = describe_model(agent.model), [*model_secrets(agent.model), *secrets]
    closers: list[Any] = []
    if trace is not None:
        from miniagent.observe.jsonl import JsonlTracer

        tracer = JsonlTracer(trace, secrets=secrets, model=info.name)
        agent.subscribe(tracer)
        closers.append(tracer.close)
    if otlp is not None:
        from miniagent.observe.otel import OtelTracer, otlp_provider

        provider = otlp_provider(otlp)
        agent.subscribe(OtelTracer(model=info, tracer_provider=provider, secrets=secrets,
                                   capture_content=otlp_content or None))
        closers.append(provider.shutdown)  # sends what is still batched
    try:
        with serving_metrics(agent.model, metrics) as counting:
            if counting is not None:
                agent.subscribe(counting)
            yield
    finally:
        for close in closers:
            close()


@contextmanager
def serving_metrics(model: Any, address: str | None) -> Iterator[Any]:
    """A :class:`~miniagent.observe.metrics.Metrics` of ``model``'s calls served on
    ``address`` (HOST:PORT) until the end; None when ``address`` is."""
    if address is None:
        yield None
        return
    from miniagent.observe.metrics import Metrics

    metrics = Metrics(model=describe_model(model))
    with metrics.serve(address):  # a bad address is said before anything runs
        yield metrics

"""What metrics cost: run time with a Metrics subscriber recording for Prometheus, for an
OpenTelemetry meter, and for both, against the same runs with no subscriber, in one process.

Each run is an in-process ReAct run over a :class:`ScriptedModel` (no network): STEPS - 1 tool
calls, then a final answer. The configurations are interleaved round by round, so a noisy
machine slows them alike; the ratio to ``none`` is the figure to watch, and the difference to
``noop`` (a subscriber that does nothing: what building and delivering the events costs) is the
metrics' own. The OpenTelemetry rows
record into the SDK's in-memory reader (collected once at the end), so no exporter or network
is timed. Rows a version of miniagent cannot build (the OTel ones before OTLP metrics) are
skipped, so the script also measures an older tree (``PYTHONPATH=old/src``).

Usage: python benchmarks/metrics_cost.py [--runs 200] [--steps 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from trace_cost import add, script, timed_runs  # the same runs as the tracing figures

from miniagent import Agent, Limits, ScriptedModel
from miniagent.core.models.describe import ModelInfo


def subscribers() -> dict[str, Callable[[Any], None] | None]:
    from miniagent.observe.metrics import Metrics

    model = ModelInfo(name="scripted", provider="miniagent")
    configs: dict[str, Callable[[Any], None] | None] = {
        "none": None, "noop": lambda event: None, "prometheus": Metrics(model=model)}
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from prometheus_client import CollectorRegistry

        configs["otel"] = Metrics(model=model, meter_provider=MeterProvider(
            metric_readers=[InMemoryMetricReader()]))
        configs["both"] = Metrics(model=model, registry=CollectorRegistry(),
                                  meter_provider=MeterProvider(
                                      metric_readers=[InMemoryMetricReader()]))
    except (ImportError, TypeError) as exc:  # no SDK, or a Metrics without meter_provider
        print(f"(the otel rows are skipped: {exc})")
    return configs


def per_event(configs: dict[str, Callable[[Any], None] | None], steps: int,
              repeat: int) -> None:
    """Each subscriber fed the recorded events of one run ``repeat`` times: its own cost per
    event, without the run's."""
    events: list[Any] = []
    agent = Agent(model=ScriptedModel(script(steps)), tools=[add],
                  limits=Limits(max_steps=steps + 1, repeat_limit=steps + 1))
    agent.run("Count up.", on_event=events.append)
    print(f"\nper event, the {len(events)} events of one run fed {repeat} times "
          "(median of 5):")
    for name, subscriber in configs.items():
        if subscriber is None:
            continue
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeat):
                for event in events:
                    subscriber(event)
            times.append((time.perf_counter() - start) / (repeat * len(events)))
        print(f"  {name:10s} {statistics.median(times) * 1e6:7.2f} µs/event")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    configs = subscribers()
    timed_runs(20, args.steps, None)  # warm-up: imports, caches
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, subscriber in configs.items():
            samples[name].append(timed_runs(args.runs, args.steps, subscriber))
    base = statistics.median(samples["none"])
    print(f"{args.runs} runs x {args.rounds} rounds, {args.steps} steps each "
          "(median seconds per run):")
    for name, values in samples.items():
        median = statistics.median(values)
        extra = (median - base) / args.steps * 1e6
        print(f"  {name:10s} {median * 1000:8.3f} ms/run  {median / args.steps * 1e6:8.1f} "
              f"µs/step  ratio {median / base:5.2f}  (+{extra:6.1f} µs/step)")
    per_event(configs, args.steps, 500)


if __name__ == "__main__":
    main()

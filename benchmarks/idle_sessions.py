"""Memory per idle session: N runs that stop waiting for approval, saved in SQLite.

Starts N runs at once on one Agent with a SQLiteStore in a temporary folder; each asks for a
tool that needs approval, so each run stops ``awaiting_approval`` with its session saved and
nothing of it left running. Then reports, per session, the growth of the process's memory over
a baseline taken after a warm-up run:

- retained: Python heap still allocated once every run has returned (tracemalloc, after a
  full collection): what an idle session costs the process;
- peak: the highest Python heap while the N runs were in flight (tracemalloc);
- RSS: the process's resident set after, and its peak (``VmHWM``), from /proc (Linux).

tracemalloc slows allocation down, so the RSS figures come from a separate process without
it. The model is in process (a scripted reply after a 10 ms pause, so the runs overlap):
what is measured is the runtime and the store, not an HTTP client. Nothing is contacted;
the temporary folder is removed.

Usage: python benchmarks/idle_sessions.py [--sessions 1000 10000] [--target-kb 50]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from miniagent import Agent, ModelRequest, ModelResponse, ScriptedModel, SQLiteStore, tool

REPLY = 'Thought: I must send it\nAction: send\nAction Input: {"to": "ops", "text": "hi"}'


@tool(requires_approval=True)
def send(to: str, text: str) -> str:
    """Send a message (a person approves each one).

    Args:
        to: who gets it
        text: what it says
    """
    return f"sent to {to}"


class PausingModel(ScriptedModel):
    """The same action for every request, after a short pause (the runs overlap)."""

    def __init__(self) -> None:
        super().__init__([])

    async def generate(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.01)
        return ModelResponse(content=REPLY)


def rss_kb(field: str = "VmRSS") -> int | None:
    """This process's resident set (or ``VmHWM``, its peak) in KiB, from /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


async def park(agent: Agent, n: int) -> float:
    """Start ``n`` runs at once; all must end waiting for approval. Returns the wall time."""
    started = time.perf_counter()
    results = await asyncio.gather(*(agent.arun(f"tell ops {i:06d}") for i in range(n)))
    waiting = sum(r.status == "awaiting_approval" for r in results)
    if waiting != n:
        raise RuntimeError(f"{n - waiting} of {n} runs did not stop waiting for approval")
    return time.perf_counter() - started


def measure(n: int, trace: bool) -> dict[str, Any]:
    """One fresh measurement of ``n`` idle sessions (run in its own process)."""
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "sessions.db")
        agent = Agent(model=PausingModel(), tools=[send], store=store)
        asyncio.run(park(agent, 1))  # warm-up: the imports, caches and prepared statements
        gc.collect()
        out: dict[str, Any] = {"n": n}
        if trace:
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        rss0 = rss_kb()
        out["wall"] = asyncio.run(park(agent, n))
        gc.collect()
        if trace:
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            out["retained"], out["peak"] = current - base, peak - base
        rss1, hwm = rss_kb(), rss_kb("VmHWM")
        if rss0 is not None and rss1 is not None and hwm is not None:
            out["rss"], out["rss_peak"] = (rss1 - rss0) * 1024, (hwm - rss0) * 1024
        out["saved"] = len(store.list(limit=n + 10)) - 1  # not the warm-up's
        store.close()
    return out


def per(value: float | None, n: int) -> str:
    """``value`` bytes per session, in KB (1,000 bytes)."""
    return f"{value / n / 1000:.1f} KB" if value is not None else "n/a"


def in_child(n: int, trace: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(n), *(["--trace"] if trace else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--target-kb", type=float, default=50.0)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.trace)))
        return
    print(f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}; memory per idle "
          f"session (waiting for approval, saved in SQLite); target <= {args.target_kb:g} KB")
    print("  sessions  saved  retained/session  peak heap/session  RSS after/session  "
          "peak RSS/session  wall s")
    for n in args.sessions:
        traced, plain = in_child(n, True), in_child(n, False)

        print(f"  {n:>8}  {plain['saved']:>5}  {per(traced['retained'], n):>16}  "
              f"{per(traced['peak'], n):>17}  {per(plain.get('rss'), n):>17}  "
              f"{per(plain.get('rss_peak'), n):>16}  {plain['wall']:>6.2f}", flush=True)
    print("  retained and peak heap: tracemalloc (Python allocations); RSS: the process, "
          "from /proc, in a run without tracemalloc. KB = 1,000 bytes.")


if __name__ == "__main__":
    main()

"""Client CPU instructions per 3-step run, counted by valgrind: repeatable on a busy machine.

Wall and CPU time move by half between runs when other work shares the cores; the number of
instructions a run executes does not (it moves by well under 1%). This script starts the
minimal-work stub (``react_stub.py --fast``) in its own process, then runs itself under
``valgrind --tool=callgrind`` (which counts every thread of the client, the sync tool's worker
too, and nothing of the stub) twice per measure: with ``--n`` repetitions and with none, after
the same two warm-up repetitions, so start-up, imports and first-use work cancel out (the
measured process leaves with ``os._exit``: the interpreter's clean-up at exit walks what the
runs left alive, which grows with ``--n``).

Measures: ``agent`` (a sequential 3-step ReAct run of ``Agent.arun``: render, HTTP, parse, a
sync tool in a worker thread, events), ``floor`` (the same three request bodies sent with
plain asyncio streams, ``raw_floor.py``, on a new connection per run), ``skeleton`` (the same
run done by ``skeleton.py``'s ReAct loop of the same parts with no runtime: the agent's
figure over this one is the runtime's own cost) and ``parse`` (one ``parse_react`` of the
stub's action reply and one of its final answer). With ``--inline-tool``
the agent's tool is ``@tool(inline=True)`` (called on the event loop: no worker thread).

Usage: python benchmarks/instructions.py [--n 20] [--only agent floor skeleton parse]
       [--inline-tool] [--no-gc]
Compare two trees by running it with ``PYTHONPATH=<other tree>/src`` too.
Needs valgrind (``apt-get install valgrind``). Only 127.0.0.1 is contacted; the stub is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import subprocess
import sys
from pathlib import Path

from overhead import add, agent_bodies, make_agent, stub_server, use_inline_tool
from raw_floor import floor_runs
from react_stub import ACTIONS, FINAL

QUESTION = "What is 1 + 2, and then + 3?"
WARM_UP = 2


async def agent_runs(url: str, n: int) -> None:
    agent = make_agent(url)
    for _ in range(WARM_UP + n):
        result = await agent.arun(QUESTION)
        assert result.status == "completed" and len(result.steps) == 3, result.reason


async def floor_runs_in_turn(url: str, n: int) -> None:
    bodies = await agent_bodies(url)
    for _ in range(WARM_UP + n):
        _, ok = await floor_runs(f"{url}/chat/completions", bodies, 1, 1)
        assert ok == 1


async def skeleton_runs(url: str, n: int, inline: bool) -> None:
    from skeleton import skeleton_run  # loads the agent's parts too: only in this child

    from miniagent.core.models.http import HttpClient

    client = HttpClient()
    try:
        for _ in range(WARM_UP + n):
            answer = await skeleton_run(client, f"{url}/chat/completions", QUESTION, add,
                                        inline)
            assert answer is not None
    finally:
        await client.aclose()


def parses(n: int) -> None:
    from miniagent.core.protocol.react_parser import parse_react

    for _ in range(WARM_UP + n):
        parse_react(ACTIONS[0])
        parse_react(FINAL)


def child(measure: str, url: str, n: int, inline: bool, no_gc: bool) -> None:
    if no_gc:
        gc.disable()  # the work alone: where young collections fall moves the count by ~2%
    if inline:
        use_inline_tool()
    if measure == "agent":
        asyncio.run(agent_runs(url, n))
    elif measure == "floor":
        asyncio.run(floor_runs_in_turn(url, n))
    elif measure == "skeleton":
        asyncio.run(skeleton_runs(url, n, inline))
    else:
        parses(n)


def instructions(measure: str, url: str, n: int, inline: bool, no_gc: bool = False) -> int:
    """Instructions the child executes, counted by callgrind."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         str(Path(__file__)), "--child", measure, "--url", url, "--n", str(n),
         *(["--inline-tool"] if inline else []), *(["--no-gc"] if no_gc else [])],
        capture_output=True, text=True, timeout=900, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{measure} with n={n} failed: {done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--only", nargs="*", default=["agent", "floor", "skeleton", "parse"],
                        choices=["agent", "floor", "skeleton", "parse"])
    parser.add_argument("--child", default=None)
    parser.add_argument("--url", default="")
    parser.add_argument("--inline-tool", action="store_true",
                        help="the agent's tool is @tool(inline=True): no worker thread")
    parser.add_argument("--no-gc", action="store_true",
                        help="the collector off in the measured process: the work alone, for "
                             "comparing two trees (collections otherwise move counts by ~2%%)")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.url, args.n, args.inline_tool, args.no_gc)
        # leave without the interpreter's clean-up: its last collection walks every object
        # still alive (the sessions an in-memory store keeps), so it grows with --n and
        # would be counted as the runs' work
        sys.stdout.flush()
        os._exit(0)
    import miniagent

    print(f"python {sys.version.split()[0]}, miniagent from {Path(miniagent.__file__).parent}")
    per: dict[str, float] = {}
    with stub_server(0.0, fast=True) as stub:
        for measure in args.only:
            base = instructions(measure, stub.url, 0, args.inline_tool, args.no_gc)
            total = instructions(measure, stub.url, args.n, args.inline_tool, args.no_gc)
            per[measure] = (total - base) / args.n
            what = "per parse pair (action + final)" if measure == "parse" else "per 3-step run"
            print(f"  {measure:6} {per[measure]:>12,.0f} instructions {what}")
    for above, below in (("agent", "floor"), ("agent", "skeleton"), ("skeleton", "floor")):
        if above in per and below in per:
            print(f"  {above}/{below} {per[above] / per[below]:.2f}x")


if __name__ == "__main__":
    main()

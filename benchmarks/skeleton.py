"""A second floor: the least work any ReAct agent does per step, beside miniagent and the floor.

``raw_floor.py`` sends prepared bytes and decodes nothing: no agent can be that cheap. The
skeleton here does what every ReAct step must, with miniagent's own pieces and nothing else:
render the prompt (``ReactProtocol.render``), encode the request body (``json.dumps``), send it
(``HttpClient``), decode the answer (``json.loads``), parse it (``parse_react``), validate the
call's arguments (the tool's checker) and call the tool, on a worker thread
(``run_in_daemon_thread``) or inline. It has no session, checkpoints, events, guards, ids,
retries, limits or clean-up of what the model sent: what is left between the skeleton and
the agent is the runtime's own cost; between the floor and the skeleton, the job's.

Prints:
  (a) client CPU per step, sequential 3-step runs against the full stub answering at once:
      raw HTTP round trips (the agent's second request, as ``overhead.py`` (a) sends it), the
      skeleton and the agent, each with the tool on a worker thread and inline;
  (b) wall time of N concurrent 3-step runs against the fast stub answering in 100 ms: the
      raw floor, the skeleton and the agent in turns on one stub per size, as ratios to
      the floor (median of ``--repeat`` bursts each);
  (c) with ``--profile N ...``: where the skeleton itself spends its time at N concurrent
      runs: its client CPU and the share of it in the garbage collector, the same burst with
      the collector's first threshold raised as the agent's runs raise it
      (:data:`~miniagent.core.runtime.inprocess.GC_YOUNG`), and a cProfile by own time.

Usage: python benchmarks/skeleton.py [--runs 300] [--concurrency 1000 3000 10000] [--repeat 3]
       [--inline-tool]  (in (b), the tool is called on the event loop by both)
       [--profile 3000 10000] [--profile-top 25] [--only-profile]
Only 127.0.0.1 is contacted; every stub is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import pstats
import statistics
import sys
import time
from cProfile import Profile
from functools import partial
from typing import Any

import overhead
from overhead import QUESTION, Side, add, agent_bodies, stub_server, timed
from raw_floor import floor_runs
from react_stub import raise_nofile_limit

from miniagent import Tool, tool
from miniagent._internal.aio import run_in_daemon_thread
from miniagent.core.models.http import HttpClient
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.runtime.inprocess import GC_YOUNG

PROTOCOL = ReactProtocol()


async def skeleton_run(client: HttpClient, url: str, question: str, tool: Tool,
                       inline: bool) -> str | None:
    """One ReAct run with nothing but the steps' own work; its final answer."""
    history: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(5):
        request = PROTOCOL.render([], [tool])  # the system prompt, cached by the protocol
        body = json.dumps({"model": "bench", "messages": request.messages + history,
                           "stop": request.stop, "temperature": 0, "max_tokens": 1024},
                          ensure_ascii=False).encode()
        answer = await client.post_json(url, body, timeout=60)
        content = json.loads(answer.body)["choices"][0]["message"]["content"]
        parsed = parse_react(content)
        if parsed.kind == "final":
            return parsed.final_answer
        call = parsed.tool_calls[0]
        values = tool.checker.validate(call.arguments)
        assert isinstance(values, dict), values
        args, kwargs = tool.checker.bind(values)
        if inline:
            result = tool.fn(*args, **kwargs)
        else:
            result = await run_in_daemon_thread(partial(tool.fn, *args, **kwargs))
        history += [{"role": "assistant", "content": content},
                    {"role": "user", "content": f"Observation: {result}"}]
    return None


async def skeleton_cpu_per_step(base_url: str, runs: int, inline: bool) -> float:
    client = HttpClient()
    url = f"{base_url}/chat/completions"
    try:
        for _ in range(10):
            await skeleton_run(client, url, "warm up", add, inline)
        cpu = time.process_time()
        for _ in range(runs):
            assert await skeleton_run(client, url, "What is 1 + 2, and then + 3?", add, inline)
        return (time.process_time() - cpu) / (3 * runs)
    finally:
        await client.aclose()


async def agent_cpu_per_step(base_url: str, runs: int) -> float:
    agent = overhead.make_agent(base_url)
    try:
        for _ in range(10):
            await agent.arun("warm up")
        _, cpu = await overhead.time_agent_steps(agent, runs)
        return cpu
    finally:
        await agent.model.aclose()


async def raw_cpu_per_step(base_url: str, runs: int) -> float:
    agent = overhead.make_agent(base_url)
    warm = await agent.arun("warm up")
    await agent.model.aclose()
    request = PROTOCOL.render(warm.messages[:3], list(agent.registry))
    body = {"model": "bench", "messages": request.messages, "stop": request.stop,
            "temperature": 0, "max_tokens": 1024}
    client = HttpClient()
    url = f"{base_url}/chat/completions"
    try:
        await overhead.time_raw_roundtrips(client, url, body, 20)
        return (await overhead.time_raw_roundtrips(client, url, body, 3 * runs))[1]
    finally:
        await client.aclose()


def per_step(runs: int, rounds: int) -> None:
    """(a): the median of ``rounds`` rounds, each measuring every kind in turn."""
    kinds: dict[str, list[float]] = {}
    with stub_server(0.0) as stub:
        for _ in range(rounds):
            for inline in (False, True):
                where = "inline" if inline else "thread"
                overhead.TOOL = tool(inline=True)(add) if inline else add
                kinds.setdefault(f"agent, tool {where}", []).append(
                    asyncio.run(agent_cpu_per_step(stub.url, runs)))
                kinds.setdefault(f"skeleton, tool {where}", []).append(
                    asyncio.run(skeleton_cpu_per_step(stub.url, runs, inline)))
            kinds.setdefault("raw HTTP round trip", []).append(
                asyncio.run(raw_cpu_per_step(stub.url, runs)))
    overhead.TOOL = add
    raw = statistics.median(kinds.pop("raw HTTP round trip"))
    print(f"(a) client CPU per step, median of {rounds} rounds of {runs} runs: raw HTTP round "
          f"trip {raw * 1e3:.3f} ms")
    for name, values in sorted(kinds.items()):
        ms = statistics.median(values) * 1e3
        print(f"    {name:24} {ms:.3f} ms, {ms - raw * 1e3:.3f} ms over the raw round trip")


async def skeleton_burst(base_url: str, n: int, inline: bool, profile: Profile | None = None
                         ) -> tuple[float, int]:
    client = HttpClient(max_connections=n)
    url = f"{base_url}/chat/completions"
    try:
        await skeleton_run(client, url, "warm up", add, inline)
        runs = [skeleton_run(client, url, QUESTION.format(i), add, inline) for i in range(n)]
        started = time.perf_counter()
        if profile is not None:
            profile.enable()
        try:
            answers = await asyncio.gather(*runs)
        finally:
            if profile is not None:
                profile.disable()
        return time.perf_counter() - started, sum(a is not None for a in answers)
    finally:
        await client.aclose()


def _median(sides: list[Side]) -> Side:
    ranked = sorted(sides, key=lambda s: s.wall if s.wall is not None else float("inf"))
    return ranked[(len(ranked) - 1) // 2]


def bursts(sizes: list[int], repeat: int, timeout: float, inline: bool = False) -> None:
    """(b): floor, skeleton and agent in turns, ``repeat`` times, on one stub per size; with
    ``inline``, the skeleton and the agent both call the tool on the event loop."""
    soft, _ = raise_nofile_limit()
    if inline:
        overhead.use_inline_tool()
    where = "inline, on the event loop" if inline else "on a worker thread"
    print(f"(b) concurrent 3-step runs (fast stub answering in 100 ms, one connection per run, "
          f"tool {where}; median of {repeat} bursts), wall s and ratio to the floor")
    print("      runs   floor s   skeleton s  skel/floor   agent s  agent/floor  agent/skel")
    for n in sizes:
        if soft < n + 100:
            print(f"    {n:>6}  skipped: needs ~{n + 100} open files, the limit is {soft}")
            continue
        sides: dict[str, list[Side]] = {"floor": [], "skeleton": [], "agent": []}
        with stub_server(0.1, fast=True) as stub:
            bodies = asyncio.run(agent_bodies(stub.url))
            url = f"{stub.url}/chat/completions"
            for _ in range(repeat):
                sides["floor"].append(asyncio.run(timed(
                    partial(floor_runs, url, bodies, n, n), stub, timeout)))
                sides["skeleton"].append(asyncio.run(timed(
                    partial(skeleton_burst, stub.url, n, inline), stub, timeout)))
                sides["agent"].append(asyncio.run(timed(
                    partial(overhead.agent_burst, stub.url, n, n, None), stub, timeout)))
        floor, skel, agent = (_median(sides[k]) for k in ("floor", "skeleton", "agent"))
        if not (floor.wall and skel.wall and agent.wall):
            errors = "; ".join(f"{k}: {s.error}" for k, s in
                               (("floor", floor), ("skeleton", skel), ("agent", agent)) if s.error)
            print(f"    {n:>6}  failed: {errors}")
            continue
        print(f"    {n:>6}  {floor.wall:8.2f}  {skel.wall:11.2f}  {skel.wall / floor.wall:9.2f}x"
              f"  {agent.wall:8.2f}  {agent.wall / floor.wall:10.2f}x  "
              f"{agent.wall / skel.wall:9.2f}x", flush=True)


def where_time_goes(sizes: list[int], timeout: float, top: int) -> None:
    """(c): the skeleton's CPU and collector share at each size, with the collector as it is
    and with its first threshold at the agent's ``GC_YOUNG``; then a cProfile by own time."""
    raise_nofile_limit()
    saved = gc.get_threshold()
    for n in sizes:
        with stub_server(0.1, fast=True) as stub:
            sides = {}
            for young in (saved[0], GC_YOUNG):
                gc.set_threshold(young, *saved[1:])
                try:
                    sides[young] = asyncio.run(timed(partial(skeleton_burst, stub.url, n, False),
                                                     stub, timeout))
                finally:
                    gc.set_threshold(*saved)
            profile = Profile()
            profiled = asyncio.run(timed(partial(skeleton_burst, stub.url, n, False, profile),
                                         stub, timeout))
        print(f"(c) where the skeleton spends its time, {n} concurrent runs:")
        for young, side in sides.items():
            share = side.gc / side.client_cpu if side.client_cpu else 0.0
            print(f"    collector threshold {young:>6}: wall {side.wall or 0:.2f} s, client CPU "
                  f"{side.client_cpu:.2f} s, in the collector {side.gc:.2f} s ({share:.0%}), "
                  f"{side.done}/{n} completed {side.error}")
        print(f"    cProfile (collector as it is): {profiled.wall or 0:.2f} s under the profiler")
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("tottime").print_stats(top)
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
        overhead.print_time_by_file(stats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1000, 3000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size-timeout", type=float, default=60.0)
    parser.add_argument("--inline-tool", action="store_true",
                        help="in (b), the skeleton and the agent call the tool on the event loop")
    parser.add_argument("--profile", type=int, nargs="*", default=None, metavar="N",
                        help="(c) at these sizes (default 3000 10000)")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--only-profile", action="store_true", help="run only (c)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    if not args.only_profile:
        per_step(max(1, args.runs), max(1, args.rounds))
        bursts(args.concurrency, max(1, args.repeat), args.size_timeout, args.inline_tool)
    if args.profile is not None or args.only_profile:
        where_time_goes(args.profile or [3000, 10000], args.size_timeout, args.profile_top)


if __name__ == "__main__":
    main()

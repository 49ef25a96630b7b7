"""Which field library would move the skeleton (and the agent): orjson, msgspec, uvloop.

The skeleton of ``skeleton.py`` (render, encode, send, decode, parse, validate, call the tool
on a worker thread) with its JSON codec and its event loop swapped, each variant in turns
against the same stub:

  (a) client CPU per step, sequential 3-step runs against the full stub answering at once,
      each variant as a ratio to the skeleton as it is (``json`` on asyncio's loop); and the
      agent itself on asyncio's loop and on uvloop (the loop is the caller's choice: no
      miniagent change is needed to run on uvloop);
  (b) wall time of N concurrent 3-step runs of the skeleton against the fast stub answering
      in 100 ms, each variant as a ratio to the skeleton as it is (median of ``--repeat``).

A library that is not installed is left out, and said so. None is a dependency of miniagent:
install them beside it to measure (e.g. ``pip install --target /tmp/fast orjson msgspec
uvloop`` and ``PYTHONPATH=/tmp/fast``). orjson and msgspec write compact JSON (no spaces
after ``,`` and ``:``); the fast stub counts observations either way. Only 127.0.0.1 is
contacted; every stub is stopped.

Usage: python benchmarks/fields.py [--runs 300] [--rounds 3] [--concurrency 1000 3000 10000]
       [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from overhead import QUESTION, add, stub_server, timed
from react_stub import raise_nofile_limit
from skeleton import PROTOCOL, agent_cpu_per_step

from miniagent import Tool
from miniagent._internal.aio import run_in_daemon_thread
from miniagent.core.models.http import HttpClient
from miniagent.core.protocol.react_parser import parse_react

Codec = tuple[Callable[[Any], bytes], Callable[[bytes], Any]]


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def codecs() -> dict[str, Codec]:
    """The JSON codecs installed here, the stdlib's first (what the skeleton uses)."""
    found: dict[str, Codec] = {
        "json": (lambda o: json.dumps(o, ensure_ascii=False).encode(), json.loads)}
    orjson, msgspec = _optional("orjson"), _optional("msgspec")
    if orjson is not None:
        found["orjson"] = (orjson.dumps, orjson.loads)
    if msgspec is not None:
        encoder, decoder = msgspec.json.Encoder(), msgspec.json.Decoder()
        found["msgspec"] = (encoder.encode, decoder.decode)
    return found


def loops() -> dict[str, Callable[[Awaitable[Any]], Any]]:
    """The event loops installed here: asyncio's own, and uvloop's."""
    found: dict[str, Callable[[Awaitable[Any]], Any]] = {"asyncio": asyncio.run}
    uvloop = _optional("uvloop")
    if uvloop is not None:
        found["uvloop"] = uvloop.run
    return found


async def skeleton_run(client: HttpClient, url: str, question: str, tool: Tool,
                       codec: Codec) -> str | None:
    """``skeleton.skeleton_run`` (tool on a worker thread) with ``codec`` for the JSON."""
    dumps, loads = codec
    history: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(5):
        request = PROTOCOL.render([], [tool])
        body = dumps({"model": "bench", "messages": request.messages + history,
                      "stop": request.stop, "temperature": 0, "max_tokens": 1024})
        answer = await client.post_json(url, body, timeout=60)
        content = loads(answer.body)["choices"][0]["message"]["content"]
        parsed = parse_react(content)
        if parsed.kind == "final":
            return parsed.final_answer
        values = tool.checker.validate(parsed.tool_calls[0].arguments)
        assert isinstance(values, dict), values
        args, kwargs = tool.checker.bind(values)
        result = await run_in_daemon_thread(partial(tool.fn, *args, **kwargs))
        history += [{"role": "assistant", "content": content},
                    {"role": "user", "content": f"Observation: {result}"}]
    return None


async def skeleton_cpu(base_url: str, runs: int, codec: Codec) -> float:
    client, url = HttpClient(), f"{base_url}/chat/completions"
    try:
        for _ in range(10):
            await skeleton_run(client, url, "warm up", add, codec)
        cpu = time.process_time()
        for _ in range(runs):
            assert await skeleton_run(client, url, "What is 1 + 2, and then + 3?", add, codec)
        return (time.process_time() - cpu) / (3 * runs)
    finally:
        await client.aclose()


async def skeleton_burst(base_url: str, n: int, codec: Codec) -> tuple[float, int]:
    client, url = HttpClient(max_connections=n), f"{base_url}/chat/completions"
    try:
        await skeleton_run(client, url, "warm up", add, codec)
        runs = [skeleton_run(client, url, QUESTION.format(i), add, codec) for i in range(n)]
        started = time.perf_counter()
        answers = await asyncio.gather(*runs)
        return time.perf_counter() - started, sum(a is not None for a in answers)
    finally:
        await client.aclose()


def variants() -> list[tuple[str, str]]:
    """(codec, loop) pairs: each codec on asyncio's loop, then the stdlib's and the fastest
    codec's on uvloop."""
    names, loop_names = list(codecs()), list(loops())
    chosen = [(name, "asyncio") for name in names]
    if "uvloop" in loop_names:
        chosen += [("json", "uvloop")] + ([("orjson", "uvloop")] if "orjson" in names else [])
    return chosen


def per_step(runs: int, rounds: int) -> None:
    """(a): every variant in turns, ``rounds`` times; the medians."""
    found_codecs, found_loops = codecs(), loops()
    cpu: dict[str, list[float]] = {}
    with stub_server(0.0) as stub:
        for _ in range(rounds):
            for codec, loop in variants():
                cpu.setdefault(f"skeleton, {codec} on {loop}", []).append(
                    found_loops[loop](skeleton_cpu(stub.url, runs, found_codecs[codec])))
            for loop, run in found_loops.items():
                step_cpu = run(agent_cpu_per_step(stub.url, runs))
                cpu.setdefault(f"agent on {loop}", []).append(step_cpu)
    base = statistics.median(cpu["skeleton, json on asyncio"])
    agent = statistics.median(cpu["agent on asyncio"])
    print(f"(a) client CPU per step, median of {rounds} rounds of {runs} sequential runs")
    for name, values in cpu.items():
        ms = statistics.median(values)
        against = agent if name.startswith("agent") else base
        print(f"    {name:32} {ms * 1e3:.3f} ms  x{ms / against:.2f}", flush=True)


def bursts(sizes: list[int], repeat: int, timeout: float) -> None:
    """(b): every variant's burst in turns, ``repeat`` times per size, on one stub per size."""
    soft, _ = raise_nofile_limit()
    found_codecs, found_loops = codecs(), loops()
    for n in sizes:
        if soft < n + 100:
            print(f"(b) {n}: skipped, needs ~{n + 100} open files, the limit is {soft}")
            continue
        walls: dict[tuple[str, str], list[float]] = {}
        with stub_server(0.1, fast=True) as stub:
            for _ in range(repeat):
                for codec, loop in variants():
                    work = partial(skeleton_burst, stub.url, n, found_codecs[codec])
                    side = found_loops[loop](timed(work, stub, timeout))
                    ok = side.wall is not None and side.done == n
                    walls.setdefault((codec, loop), []).append(
                        side.wall if ok and side.wall is not None else float("inf"))
        base = statistics.median(walls[("json", "asyncio")])
        print(f"(b) {n} concurrent skeleton runs, median of {repeat} bursts (wall s, ratio to "
              "json on asyncio)")
        for (codec, loop), values in walls.items():
            wall = statistics.median(values)
            print(f"    {codec:8} on {loop:8} {wall:7.2f} s  x{wall / base:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1000, 3000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size-timeout", type=float, default=120.0)
    args = parser.parse_args()
    missing = [name for name in ("orjson", "msgspec", "uvloop") if _optional(name) is None]
    print(f"python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; not installed (left out): {', '.join(missing) or '-'}")
    per_step(max(1, args.runs), max(1, args.rounds))
    bursts(args.concurrency, max(1, args.repeat), args.size_timeout)


if __name__ == "__main__":
    main()

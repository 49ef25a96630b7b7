"""Warm-up: what the first run pays with and without ``Agent.start()``.

For each case, three figures, medians over ``--repeats`` trials with fresh objects each time:

- cold: the first run of an agent that was not started (its tool, server or prompt is cold);
- after start: the first run of an agent after ``await agent.start()`` (the start not counted);
- warm: the next run of that same agent (steady state).

Each is printed in milliseconds and as a ratio to the warm run measured in the same trial.

Cases:
  (a) a function tool whose first call builds an inverted index over a generated corpus
      (``@tool(warmup=...)`` builds it at start instead); one scripted run, one call;
  (b) a real MCP server, ``mcp-server-time`` from PyPI over stdio: a cold run starts the
      process, shakes hands and lists before its call; one scripted run, one call;
  (c) the embedded model (xllamacpp + SmolLM2, when installed), loaded in every case: the
      first step's model time without and with the warm-up's prompt evaluation (the system
      prompt found in the KV cache), and its cached prompt tokens.

A script, not a test: it prints figures and asserts nothing.

Usage: python benchmarks/warmup.py [--repeats 5] [--corpus 200000] [--no-mcp] [--no-llama]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from miniagent import Agent, Limits, ModelSettings, ScriptedModel, tool
from miniagent.core.tools.tool import Tool

_WORDS = ("river", "delta", "harbour", "granite", "census", "tariff", "orbit", "lattice",
          "meadow", "quartz", "ledger", "beacon", "canyon", "vertex", "saffron", "tundra")


@dataclass
class Trial:
    cold: float
    after_start: float
    warm: float
    note: str = ""


def act(name: str, arguments: dict[str, Any]) -> str:
    return f"Thought: use {name}\nAction: {name}\nAction Input: {json.dumps(arguments)}"


def one_call(name: str, arguments: dict[str, Any], runs: int = 1) -> ScriptedModel:
    """A model that calls ``name`` once and answers, ``runs`` times over."""
    return ScriptedModel([act(name, arguments), "Final Answer: done"] * runs)


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


# -- (a) a function tool with a slow first call -------------------------------------------

def search_tool(documents: int) -> Tool:
    """A search tool whose index is built on first use, or by its warm-up."""
    index: dict[str, list[int]] = {}

    def build() -> None:
        if index:
            return
        rng = random.Random(7)
        for doc in range(documents):
            for word in {rng.choice(_WORDS) for _ in range(6)}:
                index.setdefault(word, []).append(doc)

    @tool(warmup=build)
    def search(word: str) -> str:
        """Find the documents that hold a word."""
        build()
        return f"{len(index.get(word, []))} documents"

    return search


async def function_trial(documents: int) -> Trial:
    cold_agent = Agent(model=one_call("search", {"word": "delta"}), tools=[search_tool(documents)])
    cold = await timed(lambda: cold_agent.arun("find delta"))
    agent = Agent(model=one_call("search", {"word": "delta"}, runs=2),
                  tools=[search_tool(documents)])
    await agent.start()
    after = await timed(lambda: agent.arun("find delta"))
    warm = await timed(lambda: agent.arun("find delta again"))
    return Trial(cold, after, warm)


# -- (b) a real MCP server ----------------------------------------------------------------

def time_server() -> Any:
    from miniagent.mcp import MCPServer

    return MCPServer.stdio(sys.executable, args=["-m", "mcp_server_time"],
                           errlog=subprocess.DEVNULL)


async def mcp_trial() -> Trial:
    arguments = {"timezone": "Asia/Tokyo"}
    cold_agent = Agent(model=one_call("get_current_time", arguments), tools=[time_server()])
    try:
        cold = await timed(lambda: cold_agent.arun("time in Tokyo?"))
    finally:
        await cold_agent.aclose()
    async with Agent(model=one_call("get_current_time", arguments, runs=2),
                     tools=[time_server()]) as agent:
        after = await timed(lambda: agent.arun("time in Tokyo?"))
        warm = await timed(lambda: agent.arun("time in Tokyo now?"))
    return Trial(cold, after, warm)


# -- (c) the embedded model -------------------------------------------------------------

def llama_available() -> bool:
    try:
        import xllamacpp  # noqa: F401

        from miniagent.core.models.local import resolve_model_path

        resolve_model_path()
    except Exception:
        return False
    return True


async def model_trial() -> Trial:
    from miniagent.core.models.local import LocalModel
    from miniagent.core.tools.calculator import calculator

    options: dict[str, Any] = dict(tools=[calculator], limits=Limits(max_steps=1),
                                   model_settings=ModelSettings(max_tokens=8),
                                   instructions="Answer arithmetic with the calculator.")
    cold_model = LocalModel()
    cold_model.load()  # loading is not what is compared: the CLI loads before the run too
    cold = await Agent(model=cold_model, **options).arun("What is 17 * 3?")
    cold_model.unload()
    model = LocalModel()
    model.load()
    agent = Agent(model=model, **options)
    await agent.start()
    after = await agent.arun("What is 17 * 3?")
    warm = await agent.arun("What is 19 * 4?")
    model.unload()
    note = (f"cached prompt tokens of the first step: cold {cold.steps[0].usage.cached_tokens}"
            f" of {cold.steps[0].usage.prompt_tokens}, after start "
            f"{after.steps[0].usage.cached_tokens} of {after.steps[0].usage.prompt_tokens}")
    return Trial(cold.steps[0].model_time, after.steps[0].model_time,
                 warm.steps[0].model_time, note)


# -- report -----------------------------------------------------------------------------------

def report(label: str, trials: list[Trial]) -> None:
    def median(field: str) -> float:
        return statistics.median(getattr(t, field) for t in trials)

    def ratio(field: str) -> float:
        return statistics.median(getattr(t, field) / t.warm for t in trials)

    print(f"\n{label} ({len(trials)} trials, medians)")
    print(f"  {'':<14}{'ms':>10}{'x warm':>10}")
    for name, field in (("cold", "cold"), ("after start", "after_start"), ("warm", "warm")):
        print(f"  {name:<14}{median(field) * 1000:>10.1f}{ratio(field):>10.2f}")
    if trials[-1].note:
        print(f"  {trials[-1].note}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corpus", type=int, default=200_000,
                        help="documents indexed by the function tool's first call")
    parser.add_argument("--no-mcp", action="store_true")
    parser.add_argument("--no-llama", action="store_true")
    args = parser.parse_args()
    repeats = max(1, args.repeats)

    report(f"(a) function tool, index of {args.corpus:,} documents built on first use: "
           "one run, one call",
           [await function_trial(args.corpus) for _ in range(repeats)])
    if not args.no_mcp:
        report("(b) MCP server mcp-server-time (stdio): one run, one call",
               [await mcp_trial() for _ in range(repeats)])
    if args.no_llama or not llama_available():
        print("\n(c) embedded model: skipped (xllamacpp or a GGUF model is missing)")
    else:
        report("(c) embedded model (SmolLM2, loaded): the first step's model time",
               [await model_trial() for _ in range(repeats)])


if __name__ == "__main__":
    asyncio.run(main())

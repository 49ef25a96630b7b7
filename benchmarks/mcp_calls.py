"""What an MCP tool call costs next to the same function as a local tool.

The same ``add`` function runs three ways: as a local ``@tool`` through the registry (the
baseline), served by ``miniagent mcp-serve`` and called over stdio, and over streamable HTTP
on 127.0.0.1. The script prints the start-up time (process start, handshake, listing), the
mean time per call in sequence and per call with N concurrent calls, and the ratio of each
to the local baseline measured in the same run. No asserts: the machine may be noisy.

Usage:
    python benchmarks/mcp_calls.py [--calls 200] [--concurrency 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from miniagent import tool
from miniagent.core.tools.toolbox import Toolbox, ToolRegistry
from miniagent.core.types import ToolCall
from miniagent.mcp import MCPServer

TOOLS = '''
from miniagent import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def timed_calls(execute, calls: int, concurrency: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    for i in range(calls):
        observation = await execute(ToolCall(id=f"s{i}", name="add", arguments={"a": i, "b": 1}))
        assert observation.output == str(i + 1), observation
    sequential = (time.perf_counter() - start) / calls
    start = time.perf_counter()
    for batch in range(0, calls, concurrency):
        results = await asyncio.gather(*(
            execute(ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": 2}))
            for i in range(batch, min(batch + concurrency, calls))))
        assert all(not r.is_error for r in results)
    return sequential, (time.perf_counter() - start) / calls


async def measure(server: MCPServer, calls: int, concurrency: int) -> tuple[float, float, float]:
    start = time.perf_counter()
    registry = ToolRegistry(await server.list_tools())
    toolbox = Toolbox((item, registry) for item in registry)
    startup = time.perf_counter() - start
    try:
        sequential, concurrent = await timed_calls(toolbox.execute, calls, concurrency)
    finally:
        await server.aclose()
    return startup, sequential, concurrent


def serve_http(tools: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", "mcp-serve", "--tools", str(tools), "--http",
         "127.0.0.1:0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for _ in range(50):  # a few lines at most before the address
        match = re.search(r"at (http://\S+/mcp)", process.stderr.readline())
        if match:
            return process, match.group(1)
    process.kill()
    raise RuntimeError("mcp-serve did not start")


async def main(calls: int, concurrency: int) -> None:
    local = await timed_calls(ToolRegistry([add]).execute, calls, concurrency)
    print(f"local @tool: {local[0] * 1e6:8.0f} µs/call sequential, "
          f"{local[1] * 1e6:8.0f} µs/call at {concurrency} concurrent")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as folder:
        tools = Path(folder) / "bench_tools.py"
        tools.write_text(TOOLS, encoding="utf-8")
        stdio = MCPServer.stdio(sys.executable, args=["-m", "miniagent", "mcp-serve", "--tools",
                                                      str(tools)], env={"PYTHONPATH": src},
                                errlog=subprocess.DEVNULL)
        report("mcp stdio", await measure(stdio, calls, concurrency), local, concurrency)
        process, url = serve_http(tools, env)
        try:
            report("mcp http ", await measure(MCPServer.http(url), calls, concurrency), local,
                   concurrency)
        finally:
            process.terminate()
            process.wait(10)


def report(label: str, figures: tuple[float, float, float], local: tuple[float, float],
           concurrency: int) -> None:
    startup, sequential, concurrent = figures
    print(f"{label}:  {sequential * 1e6:8.0f} µs/call sequential ({sequential / local[0]:.0f}x "
          f"local), {concurrent * 1e6:8.0f} µs/call at {concurrency} concurrent "
          f"({concurrent / local[1]:.0f}x local); start + list {startup:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.concurrency))

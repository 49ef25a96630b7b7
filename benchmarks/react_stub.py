"""A stub server for the benchmarks: a 3-step ReAct conversation, decided from each request.

The answer depends only on how many observations the request already carries, so any number
of concurrent runs can share one server. Prints its base URL, then serves until killed.
Usage: python benchmarks/react_stub.py [--latency 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from miniagent.testing.stub_server import StubServer

ACTIONS = [
    'Thought: add first\nAction: add\nAction Input: {"a": 1, "b": 2}',
    'Thought: then add again\nAction: add\nAction Input: {"a": 3, "b": 3}',
]
FINAL = "Thought: I now know the final answer\nFinal Answer: 6"


def answer(request: dict[str, Any], _n: int) -> str:
    seen = sum(
        1 for m in request.get("messages", [])
        if m.get("role") == "tool" or str(m.get("content") or "").startswith("Observation:")
    )
    return ACTIONS[seen] if seen < len(ACTIONS) else FINAL


async def serve(latency: float) -> None:
    async with StubServer(answer, latency=latency) as stub:
        print(stub.base_url, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    asyncio.run(serve(parser.parse_args().latency))

"""What streaming costs the client: the same answers streamed and not, from the stub server.

The stub runs in the same event loop and answers a fixed ~1,200-character ReAct reply (or a
native reply with two tool calls), streamed in pieces of ``--piece`` characters; its own cost of
writing the events is part of the streamed time, as a real server's would be. For
each kind the script prints the client's time per completion with ``stream=False`` and with
``stream=True`` in the same run, and their ratio (the stub's own work of building and writing
some 300 events is in it: this is the loopback worst case, not what a real server costs). Then
the client's own cost per event (event-stream
reading and accumulation alone, no network) as a share of the time a model takes per token at
50 tokens/s: what streaming adds on a real server. No asserts: the machine may be noisy.

Usage:
    python benchmarks/streaming.py [--requests 200] [--piece 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from miniagent import OpenAICompatibleModel
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import StreamStyle, StubServer

TEXT = ("Thought: " + "I should look this up before I answer, to be sure. " * 22
        + '\nAction: search\nAction Input: {"query": "北京 weather today"}')
NATIVE: dict[str, Any] = {"content": "Thought: two lookups", "tool_calls": [
    {"name": "search", "arguments": {"query": "北京 weather", "limit": 5}},
    {"name": "calc", "arguments": {"expression": "2*(3+4)"}}]}


async def timed(model: OpenAICompatibleModel, n: int) -> tuple[float, float]:
    """Mean seconds per completion, and mean seconds to the first delta."""
    request = ModelRequest(messages=[{"role": "user", "content": "q"}])
    totals, firsts = [], []
    first: list[float] = []

    def note(_channel: str, _text: str) -> None:
        if not first:
            first.append(time.perf_counter())

    for _ in range(n):
        first.clear()
        start = time.perf_counter()
        response = await model.generate(request, on_delta=note)
        totals.append(time.perf_counter() - start)
        firsts.append((first[0] if first else time.perf_counter()) - start)
        assert response.content or response.tool_calls
    return statistics.fmean(totals), statistics.fmean(firsts)


async def compare(kind: str, reply: Any, n: int, piece: int) -> None:
    style = StreamStyle(text_piece=piece, argument_piece=piece)
    async with StubServer(lambda _data, _i: reply, stream_style=style) as stub:
        plain = OpenAICompatibleModel(base_url=stub.base_url, max_retries=0)
        streamed = OpenAICompatibleModel(base_url=stub.base_url, max_retries=0, stream=True)
        await timed(plain, 5)
        await timed(streamed, 5)  # warm up both pools
        base, _ = await timed(plain, n)
        total, _ = await timed(streamed, n)
        await plain.aclose()
        await streamed.aclose()
    print(f"{kind:7} plain {base * 1e3:7.2f} ms  streamed {total * 1e3:7.2f} ms  "
          f"ratio {total / base:5.2f}")


def parse_cost(reply: Any, piece: int, repeat: int = 200) -> float:
    """Seconds of client work per event: SSE reading plus accumulation of one streamed reply."""
    from miniagent.core.models.sse import SSEReader
    from miniagent.core.models.streaming import StreamAccumulator
    from miniagent.core.protocol.react import STOP_WORDS
    from miniagent.testing.stub_server import stream_events

    spec = {"content": reply} if isinstance(reply, str) else reply
    body = StubServer([])._completion_body(spec, {})
    style = StreamStyle(text_piece=piece, argument_piece=piece)
    wire = b"".join(f"data: {e}\n\n".encode() for e in stream_events(body, style,
                                                                     with_usage=True))
    events = len(stream_events(body, style, with_usage=True))
    start = time.perf_counter()
    for _ in range(repeat):
        reader, acc = SSEReader(), StreamAccumulator(stop=STOP_WORDS, on_delta=lambda c, t: None)
        for i in range(0, len(wire), 512):  # pieces as a socket might deliver them
            for data in reader.feed(wire[i:i + 512]):
                acc.feed(data)
        acc.body()
    return (time.perf_counter() - start) / (repeat * events)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--piece", type=int, default=4)
    args = parser.parse_args()
    print(f"{args.requests} sequential completions each, pieces of {args.piece} characters")
    await compare("react", TEXT, args.requests, args.piece)
    await compare("native", NATIVE, args.requests, args.piece)
    for kind, reply in (("react", TEXT), ("native", NATIVE)):
        cost = parse_cost(reply, args.piece)
        print(f"{kind:7} client work per event {cost * 1e6:6.1f} µs = {cost / 0.02:6.2%} of a "
              "token's time at 50 tokens/s")


if __name__ == "__main__":
    asyncio.run(main())

"""A stub server for the benchmarks: a 3-step ReAct conversation, decided from each request.

The answer depends only on how many observations the request already carries, so any number
of concurrent runs can share one server. Prints its base URL, then serves until killed.

Two implementations:

- the default, miniagent's :class:`~miniagent.testing.stub_server.StubServer` (asyncio
  streams, a parsed JSON request, a JSON answer built per request);
- ``--fast``: an :class:`asyncio.Protocol` doing the least work per request (no JSON parsing:
  it counts ``"content": "Observation:`` in the body bytes and sends one of three answers
  encoded at start), so one core serves tens of thousands of requests per second and the
  client, not the stub, is what a concurrency benchmark measures.

Both raise their open-file limit to the hard limit. The fast one listens with a backlog of
65535, StubServer with 4096 (the kernel caps both at ``net.core.somaxconn``).
Usage: python benchmarks/react_stub.py [--latency 0.1] [--fast]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
from typing import Any

from miniagent.testing.stub_server import StubServer

ACTIONS = [
    'Thought: add first\nAction: add\nAction Input: {"a": 1, "b": 2}',
    'Thought: then add again\nAction: add\nAction Input: {"a": 3, "b": 3}',
]
FINAL = "Thought: I now know the final answer\nFinal Answer: 6"
BACKLOG = 65535


def answer(request: dict[str, Any], _n: int) -> str:
    seen = sum(
        1 for m in request.get("messages", [])
        if m.get("role") == "tool" or str(m.get("content") or "").startswith("Observation:")
    )
    return ACTIONS[seen] if seen < len(ACTIONS) else FINAL


def raise_nofile_limit() -> tuple[int, int]:
    """Raise this process's soft open-file limit to the hard one; return ``(soft, hard)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):  # else keep it; the benchmark says it
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def serve(latency: float) -> None:
    async with StubServer(answer, latency=latency) as stub:  # listens with a backlog of 4096
        print(stub.base_url, flush=True)
        await asyncio.Event().wait()


# -- the fast stub --------------------------------------------------------------------------

_OBSERVATION_MARKS = (b'"content": "Observation:', b'"content":"Observation:')


def _reply(content: str) -> bytes:
    body = json.dumps({
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "prompt_tokens_details": {"cached_tokens": 0}},
    }).encode()
    head = ("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


_REPLIES = [_reply(text) for text in (*ACTIONS, FINAL)]
_NOT_FOUND = (b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
              b"Connection: keep-alive\r\nContent-Length: 2\r\n\r\n{}")


def _content_length(head: bytes) -> int:
    start = head.find(b"content-length:")
    if start < 0:
        return 0
    line_end = head.find(b"\r\n", start)
    return int(head[start + 15:line_end if line_end >= 0 else len(head)])


class _FastStub(asyncio.Protocol):
    """One connection: find each request's end by Content-Length, answer after ``latency``."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buffer[:end]).lower()
            total = end + 4 + _content_length(head)
            if len(self.buffer) < total:
                return
            body = bytes(self.buffer[end + 4:total])
            del self.buffer[:total]
            if head.startswith(b"post ") and b"/chat/completions" in head[:200]:
                seen = sum(body.count(mark_) for mark_ in _OBSERVATION_MARKS)
                reply = _REPLIES[min(seen, len(_REPLIES) - 1)]
            else:
                reply = _NOT_FOUND
            if self.latency:
                self.loop.call_later(self.latency, self._send, reply)
            else:
                self._send(reply)

    def _send(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve_fast(latency: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _FastStub(latency), "127.0.0.1", 0,
                                      backlog=BACKLOG)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fast", action="store_true", help="the minimal-work stub")
    args = parser.parse_args()
    raise_nofile_limit()
    asyncio.run((serve_fast if args.fast else serve)(args.latency))

"""The raw asyncio floor: concurrent 3-request "runs" with no miniagent code at all.

Each run sends the given request bodies one after the other (the agent's step 1, 2 and 3
bodies) over plain ``asyncio.open_connection`` streams, with a hand-written HTTP/1.1
keep-alive exchange: one write of head and body, then the header block, then
``Content-Length`` bytes of body. Answers are checked for status 200 but not decoded.
Connections come from a pool shaped like the agent's (idle ones reused last-in first-out,
at most ``max_connections`` open, further requests waiting first-in first-out), so both
sides open the same number of connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from urllib.parse import urlsplit

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class FloorPool:
    """At most ``size`` keep-alive connections to one host and port."""

    def __init__(self, host: str, port: int, size: int) -> None:
        self.host, self.port, self.size = host, port, size
        self.opened: list[_Conn] = []
        self.idle: deque[_Conn] = deque()
        self.waiters: deque[asyncio.Future[_Conn]] = deque()

    async def get(self) -> _Conn:
        if self.idle:
            return self.idle.pop()
        if len(self.opened) < self.size:
            conn = await asyncio.open_connection(self.host, self.port)
            self.opened.append(conn)
            return conn
        waiter: asyncio.Future[_Conn] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        return await waiter

    def put(self, conn: _Conn) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self.idle.append(conn)

    async def close(self) -> None:
        for _, writer in self.opened:
            writer.close()
        for _, writer in self.opened:
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 1.0)


def request_bytes(url: str, body: bytes) -> bytes:
    """Head and body of a POST as the agent's client sends it (same headers, same order)."""
    parts = urlsplit(url)
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
            f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n"
            "Accept: application/json\r\n\r\n")
    return head.encode("latin-1") + body


async def _post(pool: FloorPool, request: bytes) -> bool:
    reader, writer = conn = await pool.get()
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    start = head.lower().find(b"content-length:") + 15
    length = int(head[start:head.find(b"\r\n", start)])
    await reader.readexactly(length)
    pool.put(conn)
    return head.startswith(b"HTTP/1.1 200")


async def _run(pool: FloorPool, requests: list[bytes]) -> bool:
    ok = True
    for request in requests:
        ok = await _post(pool, request) and ok
    return ok


async def floor_runs(url: str, bodies: list[bytes], n: int, max_connections: int
                     ) -> tuple[float, int]:
    """Wall time of ``n`` concurrent runs sending ``bodies`` in turn, and how many got only
    200 answers."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    pool = FloorPool(parts.hostname, parts.port, max_connections)
    requests = [request_bytes(url, body) for body in bodies]
    try:
        started = time.perf_counter()
        results = await asyncio.gather(*(_run(pool, requests) for _ in range(n)))
        return time.perf_counter() - started, sum(results)
    finally:
        await pool.close()

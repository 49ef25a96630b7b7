"""Fixtures for the model tests: stub servers and raw hand-written servers on 127.0.0.1, and a
port nobody listens on."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from miniagent.testing.stub_server import StubServer


@pytest.fixture
def stub() -> Iterator[Callable[..., StubServer]]:
    """Start stub servers (each in its own thread); all are stopped after the test."""
    with contextlib.ExitStack() as stack:

        def start(responses: Any = (), **options: Any) -> StubServer:
            return stack.enter_context(StubServer(responses, **options).run_in_thread())

        yield start


@pytest.fixture
def dead_port() -> int:
    """A loopback port with nothing listening: bound once, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
RawServer = Callable[[Handler], AbstractAsyncContextManager[str]]


@pytest.fixture
def raw_server() -> RawServer:
    """``async with raw_server(handler) as base_url``: a TCP server on 127.0.0.1 running
    ``handler`` per connection, for misbehaviour the stub server cannot script. On leaving,
    the server and every connection are closed and every handler has ended."""
    return _raw_server


@asynccontextmanager
async def _raw_server(handler: Handler) -> AsyncIterator[str]:
    handlers: set[asyncio.Task[Any]] = set()
    writers: set[asyncio.StreamWriter] = set()

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        writers.add(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up: what these tests expect it to do
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        for writer in writers:  # handlers waiting on a kept-alive connection see EOF and end
            writer.close()
        await asyncio.wait_for(asyncio.gather(*handlers, return_exceptions=True), 30)
        await server.wait_closed()

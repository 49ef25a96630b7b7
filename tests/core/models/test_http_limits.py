"""HttpClient against servers that never stop sending, lie about lengths, or write numbers
int() would take but HTTP does not: memory stays bounded, the connection is closed, and the
errors are ModelErrors."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from miniagent.core.errors import ConfigError, ModelConnectionError, ModelResponseError
from miniagent.core.models.http import DEFAULT_MAX_BODY_BYTES, HttpClient
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import StubServer

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
RawServer = Callable[[Handler], AbstractAsyncContextManager[str]]  # the conftest fixture
MESSAGES = [{"role": "user", "content": "hi"}]
MiB = 1 << 20
HANG_CHECK = 30.0  # bounded waits, so a regression fails instead of hanging the suite


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))


def streaming(head: bytes, piece: bytes, total: int, hung_up: asyncio.Event) -> Handler:
    """A server answering with ``head`` and then ``piece`` over and over, up to ``total``
    bytes (far past any limit under test), noting when the client hangs up on it."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        sent = 0
        try:
            while sent < total:
                writer.write(piece)
                await writer.drain()
                sent += len(piece)
        except ConnectionError:
            hung_up.set()
            return
        await reader.read()  # the client hangs up once it has read enough, or at the end
        hung_up.set()

    return handler


async def peak_memory_of(work: Awaitable[Any]) -> tuple[BaseException | None, int]:
    tracemalloc.start()
    try:
        await asyncio.wait_for(work, HANG_CHECK)
        error: BaseException | None = None
    except Exception as exc:
        error = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return error, peak



# -- max_body_bytes -----------------------------------------------------------------------

CLOSE_DELIMITED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
BIG_CHUNK = b"%x\r\n" % (64 * 1024) + b"x" * (64 * 1024) + b"\r\n"
TINY_CHUNKS = b"1\r\nx\r\n" * 10_000


@pytest.mark.parametrize(
    ("head", "piece", "total", "limit"),
    [
        (CLOSE_DELIMITED, b"x" * 65536, 128 * MiB, MiB),
        (CHUNKED, BIG_CHUNK, 128 * MiB, MiB),
        # a list of 1-byte chunks costs ~50x their size; a smaller limit keeps the number of
        # chunks read (slow under tracemalloc on a loaded machine) in the tens of thousands
        (CHUNKED, TINY_CHUNKS, 16 * MiB, 64 * 1024),
        (CHUNKED + b"0\r\n", b"X-Trailer: " + b"y" * 1000 + b"\r\n", 16 * MiB, MiB),
    ],
    ids=["close-delimited", "chunked", "tiny-chunks", "endless-trailers"],
)
async def test_a_body_that_never_ends_is_cut_off_at_the_limit(
        raw_server: RawServer, head: bytes, piece: bytes, total: int, limit: int) -> None:
    hung_up = asyncio.Event()
    async with raw_server(streaming(head, piece, total, hung_up)) as base:
        client = HttpClient(max_body_bytes=limit)
        error, peak = await peak_memory_of(
            client.post_json(base + "/chat/completions", {"m": 1}, timeout=HANG_CHECK))
        await asyncio.wait_for(hung_up.wait(), HANG_CHECK)  # the connection was closed
        pools = list(client._pools.values())
        await client.aclose()
    assert isinstance(error, ModelResponseError), error
    assert f"over the {limit:,} byte limit (max_body_bytes)" in str(error)
    assert peak < 24 * MiB  # generous: the limit, a copy of it, and stream buffers
    assert all(not pool.idle for pool in pools)  # never handed back to the pool


async def test_a_declared_length_over_the_limit_is_refused_before_reading(
        raw_server: RawServer) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n")
        await writer.drain()
        await reader.read()  # and never a byte of the body: only refusing it ends this

    async with raw_server(handler) as base:
        client = HttpClient(max_body_bytes=MiB)
        with pytest.raises(ModelResponseError, match="over the 1,048,576 byte limit"):
            await client.post_json(base + "/chat/completions", {"m": 1}, timeout=HANG_CHECK)
        await client.aclose()


async def test_over_the_limit_closes_the_connection_and_the_next_request_opens_one(
        raw_server: RawServer) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            await read_request(reader)
            size = 2000 if connections == 1 else 10
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size)
            await writer.drain()

    async with raw_server(handler) as base:
        client = HttpClient(max_body_bytes=1000)
        with pytest.raises(ModelResponseError):
            await client.post_json(base + "/chat/completions", {"m": 1})
        response = await client.post_json(base + "/chat/completions", {"m": 1})
        await client.aclose()
    assert (response.body, connections) == (b"x" * 10, 2)


async def test_a_body_exactly_at_the_limit_is_read(stub: Callable[..., StubServer]) -> None:
    server = stub([{"content": "y" * 5000}])
    url = server.base_url + "/chat/completions"
    probe = HttpClient()
    size = len((await probe.post_json(url, {"m": 1})).body)
    await probe.aclose()
    server = stub([{"content": "y" * 5000}] * 2, chunked=True)
    for limit, fits in ((size, True), (size - 1, False)):
        client = HttpClient(max_body_bytes=limit)
        try:
            response = await client.post_json(server.base_url + "/chat/completions", {"m": 1})
            assert fits and len(response.body) == size
        except ModelResponseError:
            assert not fits
        finally:
            await client.aclose()


async def test_the_model_passes_its_limit_and_does_not_retry_it(
        stub: Callable[..., StubServer]) -> None:
    assert HttpClient().max_body_bytes == DEFAULT_MAX_BODY_BYTES == 32 * MiB
    assert OpenAICompatibleModel().max_body_bytes == 32 * MiB
    with pytest.raises(ConfigError, match="max_body_bytes"):
        OpenAICompatibleModel(max_body_bytes=0)
    server = stub(["x" * 10_000] * 4)
    model = OpenAICompatibleModel(base_url=server.base_url, max_body_bytes=1000,
                                  backoff_base=0.01)
    with pytest.raises(ModelResponseError, match="over the 1,000 byte limit"):
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert len(server.requests) == 1  # fetching it again would not make it shorter


# -- numbers from the server, read strictly -----------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 \xb2\xb2\xb2 OK\r\nContent-Length: 0\r\n\r\n",  # "²²²" in Latin-1
        b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n",
    ],
    ids=["status", "plus", "hex", "underscore", "negative", "twice", "chunk-0x", "chunk-plus"],
)
async def test_malformed_numbers_are_a_connection_error(
        raw_server: RawServer, answer: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer)
        await writer.drain()

    async with raw_server(handler) as base:
        client = HttpClient()
        with pytest.raises(ModelConnectionError, match="malformed HTTP answer"):
            await client.post_json(base + "/chat/completions", {"m": 1}, timeout=HANG_CHECK)
        await client.aclose()




async def test_a_head_of_one_header_repeated_is_read_in_linear_time(
        raw_server: RawServer) -> None:
    """A 1 MiB head of 170,000 repeats of one header; the join is ", ".join, not quadratic."""
    head = b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 170_000 + b"Content-Length: 2\r\n\r\n{}"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head)
        await writer.drain()

    async with raw_server(handler) as base:
        client = HttpClient()
        response = await client.post_json(base + "/chat/completions", {"m": 1},
                                          timeout=HANG_CHECK)
        await client.aclose()
    assert response.headers["x"] == ", ".join(["y"] * 170_000)

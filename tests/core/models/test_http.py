"""HttpClient against the stub server and a few hand-written raw servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from miniagent.core.errors import ModelConnectionError, ModelTimeout
from miniagent.core.models.http import HttpClient, HttpResponse, _parse_head, _ProtocolError, _Slots
from miniagent.testing.stub_server import Fault, StubServer

PAYLOAD = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def content_of(body: dict) -> str:
    return str(body["choices"][0]["message"]["content"])


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    """A one-off TCP server on 127.0.0.1; yields its chat completions URL."""

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        server.close()


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)


async def test_keep_alive_reuses_one_connection(stub: Callable[..., StubServer]) -> None:
    server = stub(["a", "b", "c", "d"])
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    answers = [content_of((await client.post_json(url, PAYLOAD)).json()) for _ in range(4)]
    await client.aclose()
    assert answers == ["a", "b", "c", "d"]
    assert server.connections == 1


async def test_response_fields(stub: Callable[..., StubServer]) -> None:
    server = stub(["hello"])
    client = HttpClient()
    response = await client.post_json(server.base_url + "/chat/completions", PAYLOAD)
    await client.aclose()
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["choices"][0]["message"]["content"] == "hello"
    assert server.requests == [PAYLOAD]
    assert server.request_headers[0]["content-type"] == "application/json"


async def test_concurrent_requests_respect_max_connections(
    stub: Callable[..., StubServer],
) -> None:
    server = stub(lambda data, n: f"r{n}", latency=0.05)
    client = HttpClient(max_connections=3)
    url = server.base_url + "/chat/completions"
    responses = await asyncio.gather(*(client.post_json(url, PAYLOAD) for _ in range(12)))
    await client.aclose()
    assert sorted(content_of(r.json()) for r in responses) == sorted(f"r{n}" for n in range(12))
    assert server.connections <= 3


async def test_chunked_response(stub: Callable[..., StubServer]) -> None:
    server = stub(["x" * 1000, "short"], chunked=True)
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    first = await client.post_json(url, PAYLOAD)
    second = await client.post_json(url, PAYLOAD)
    await client.aclose()
    assert "content-length" not in first.headers
    assert content_of(first.json()) == "x" * 1000
    assert content_of(second.json()) == "short"
    assert server.connections == 1


async def test_connection_close_is_honoured(stub: Callable[..., StubServer]) -> None:
    server = stub(["a", "b", "c"], keep_alive=False)
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    answers = [content_of((await client.post_json(url, PAYLOAD)).json()) for _ in range(3)]
    await client.aclose()
    assert answers == ["a", "b", "c"]
    assert server.connections == 3


async def test_stale_pooled_connection_is_retried_once(stub: Callable[..., StubServer]) -> None:
    # The server drops the reused connection without answering: the client must
    # send the request again on a fresh connection, invisibly to the caller.
    server = stub(["a", Fault(close=True), "b"])
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    first = await client.post_json(url, PAYLOAD)
    second = await client.post_json(url, PAYLOAD)
    await client.aclose()
    assert [content_of(first.json()), content_of(second.json())] == ["a", "b"]
    assert server.connections == 2
    assert len(server.requests) == 3


async def test_connection_closed_while_idle(stub: Callable[..., StubServer]) -> None:
    server = stub(["a", "b"], idle_timeout=0.05)
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    await client.post_json(url, PAYLOAD)
    await asyncio.sleep(1.0)  # the server (idle timeout 0.05 s) closes the connection meanwhile
    second = await client.post_json(url, PAYLOAD)
    await client.aclose()
    assert content_of(second.json()) == "b"
    assert server.connections == 2


async def test_dropped_fresh_connection_raises(stub: Callable[..., StubServer]) -> None:
    server = stub([Fault(close=True)])
    client = HttpClient()
    with pytest.raises(ModelConnectionError, match="closed the connection"):
        await client.post_json(server.base_url + "/chat/completions", PAYLOAD)
    await client.aclose()


async def test_refused_connection(dead_port: int) -> None:
    client = HttpClient()
    with pytest.raises(ModelConnectionError, match="connection refused"):
        await client.post_json(f"http://127.0.0.1:{dead_port}/v1/chat/completions", PAYLOAD)


async def test_timeout(stub: Callable[..., StubServer]) -> None:
    server = stub([Fault(delay=5.0), "late"])
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    with pytest.raises(ModelTimeout, match=r"within 0\.3 s"):
        await client.post_json(url, PAYLOAD, timeout=0.3)
    # The timed-out connection was discarded; the next request works on a new one.
    response = await client.post_json(url, PAYLOAD)
    await client.aclose()
    assert content_of(response.json()) == "late"
    assert server.connections == 2


async def test_a_timeout_leaves_the_task_as_it_found_it(stub: Callable[..., StubServer]
                                                       ) -> None:
    """The request's timer takes its own cancellation back: the task is not left cancelling
    (a later asyncio.timeout or TaskGroup in the same task would misread it)."""
    server = stub([Fault(delay=5.0), "late"])
    client = HttpClient()
    task = asyncio.current_task()
    assert task is not None
    with pytest.raises(ModelTimeout):
        await client.post_json(server.base_url + "/chat/completions", PAYLOAD, timeout=0.2)
    assert task.cancelling() == 0
    response = await client.post_json(server.base_url + "/chat/completions", PAYLOAD)
    await client.aclose()
    assert content_of(response.json()) == "late" and task.cancelling() == 0


async def test_a_caller_cancelling_a_request_is_not_a_timeout(
        stub: Callable[..., StubServer]) -> None:
    server = stub([Fault(delay=5.0)])
    client = HttpClient()
    request = asyncio.ensure_future(
        client.post_json(server.base_url + "/chat/completions", PAYLOAD, timeout=30))
    await asyncio.sleep(0.2)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    await client.aclose()


async def test_error_status_is_returned_not_raised(stub: Callable[..., StubServer]) -> None:
    server = stub([Fault(status=503, headers={"Retry-After": "2"})])
    client = HttpClient()
    response = await client.post_json(server.base_url + "/chat/completions", PAYLOAD)
    await client.aclose()
    assert response.status == 503
    assert response.headers["retry-after"] == "2"
    assert "stub fault 503" in response.text()


async def test_get_request(stub: Callable[..., StubServer]) -> None:
    server = stub([], model="tiny")
    client = HttpClient()
    response = await client.request("GET", server.base_url + "/models")
    await client.aclose()
    assert response.json()["data"][0]["id"] == "tiny"


async def test_close_delimited_body_after_interim_answer() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        writer.write(b'{"ok": true}')
        await writer.drain()

    async with raw_server(handler) as url:
        client = HttpClient()
        first = await client.post_json(url, PAYLOAD)
        second = await client.post_json(url, PAYLOAD)  # needs a new connection
        await client.aclose()
    assert first.status == 200
    assert first.json() == {"ok": True}
    assert second.json() == {"ok": True}


async def test_malformed_answer_is_a_connection_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()

    async with raw_server(handler) as url:
        client = HttpClient()
        with pytest.raises(ModelConnectionError, match="malformed HTTP answer"):
            await client.post_json(url, PAYLOAD)


def test_header_block_rules() -> None:
    """Names lower-cased, names and values stripped, repeats joined with ", " in order, lines
    without a colon skipped; a lone CR or LF stays inside its line (only CRLF ends one)."""
    block = (b"HTTP/1.1 200 OK\r\n  Content-Type :  text/plain \t\r\nno colon here\r\n"
             b"X-A: 1\r\nx-a:2:3\r\nX-A:\r\n: empty name\r\nX-B: a\rb\nc\r\n"
             b"X-C: \xe9\r\n\r\n")
    status, version, headers = _parse_head(block)
    assert (status, version) == (200, "HTTP/1.1")
    assert headers == {"content-type": "text/plain", "x-a": "1, 2:3, ", "": "empty name",
                       "x-b": "a\rb\nc", "x-c": "\xe9"}
    assert _parse_head(b"HTTP/1.0 204\r\n\r\n") == (204, "HTTP/1.0", {})


def test_a_bad_status_line_is_a_protocol_error() -> None:
    for block in (b"HTTP/2 200 OK\r\n\r\n", b"HTTP/1.1 2x0 OK\r\n\r\n", b"HTTP/1.1\r\nX: 1\r\n"):
        with pytest.raises(_ProtocolError, match="bad status line"):
            _parse_head(block)


async def test_client_usable_after_aclose(stub: Callable[..., StubServer]) -> None:
    server = stub(["a", "b"])
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    await client.post_json(url, PAYLOAD)
    await client.aclose()
    response = await client.post_json(url, PAYLOAD)
    await client.aclose()
    assert content_of(response.json()) == "b"
    assert server.connections == 2


def test_client_survives_a_new_event_loop(stub: Callable[..., StubServer]) -> None:
    # Sync entry points run asyncio.run() per call; a pool from a closed loop is dropped.
    server = stub(["a", "b"])
    client = HttpClient()
    url = server.base_url + "/chat/completions"

    async def second_run() -> HttpResponse:
        try:
            return await client.post_json(url, PAYLOAD)
        finally:
            await client.aclose()

    first = asyncio.run(client.post_json(url, PAYLOAD))
    second = asyncio.run(second_run())
    assert [content_of(first.json()), content_of(second.json())] == ["a", "b"]


async def test_async_context_manager_form() -> None:
    async with StubServer(["inline"]) as server:
        client = HttpClient()
        response = await client.post_json(server.base_url + "/chat/completions", b'{"a": 1}')
        await client.aclose()
    assert content_of(response.json()) == "inline"
    assert server.requests == [{"a": 1}]


async def test_bad_url_and_header_injection() -> None:
    client = HttpClient()
    with pytest.raises(ValueError, match="not an http"):
        await client.post_json("ftp://127.0.0.1/x", PAYLOAD)
    with pytest.raises(ValueError, match="line break"):
        await client.post_json("http://127.0.0.1:1/x", PAYLOAD, {"X-A": "1\r\nX-B: 2"})


async def test_stub_reports_exhausted_responses(stub: Callable[..., StubServer]) -> None:
    server = stub(["only"])
    client = HttpClient()
    url = server.base_url + "/chat/completions"
    await client.post_json(url, PAYLOAD)
    response = await client.post_json(url, PAYLOAD)
    await client.aclose()
    assert response.status == 500
    assert "no scripted response left" in response.text()
    assert server.notes and "request #2" in server.notes[0]


async def test_slots_survive_cancelled_waiters() -> None:
    slots = _Slots(1)
    await slots.__aenter__()  # the only slot is taken
    waiting = [asyncio.ensure_future(slots.__aenter__()) for _ in range(3)]
    await asyncio.sleep(0)
    waiting[0].cancel()  # cancelled while queued: skipped on release
    slots.release()  # handed to waiting[1]
    waiting[1].cancel()  # handed a slot, then cancelled before running: passes it on
    await asyncio.gather(*waiting, return_exceptions=True)
    assert waiting[2].done() and not waiting[2].cancelled()
    slots.release()
    assert (slots.free, len(slots.waiters)) == (1, 0)


async def test_waiting_for_a_connection_counts_against_the_timeout(
    stub: Callable[..., StubServer],
) -> None:
    server = stub(lambda data, n: "ok", latency=0.5)
    client = HttpClient(max_connections=1)
    url = server.base_url + "/chat/completions"
    results = await asyncio.gather(
        client.post_json(url, PAYLOAD, timeout=5.0),
        *(client.post_json(url, PAYLOAD, timeout=0.2) for _ in range(5)),
        return_exceptions=True,
    )
    assert isinstance(results[0], HttpResponse)
    assert all(isinstance(r, ModelTimeout) for r in results[1:])
    response = await client.post_json(url, PAYLOAD)  # the slot accounting is intact
    await client.aclose()
    assert response.status == 200

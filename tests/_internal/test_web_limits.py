"""uvicorn with miniagent's bounds, in this process over real sockets: a connection over the cap
is closed at once, and a second request on a kept-alive connection has its own deadline."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")

import uvicorn

from miniagent._internal import web_limits
from miniagent.testing.slow_clients import closed_by_server, stalled_requests


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await asyncio.sleep(0.05)  # the head and the body reach the client apart, as they may
    await send({"type": "http.response.body", "body": b"ok"})


def read_until(sock: socket.socket, end: bytes, most: int = 65536) -> bytes:
    """What arrives until it ends with ``end``, the server closes, or ``most`` bytes came (a
    response may come in several pieces: uvicorn writes the head and the body apart)."""
    received = b""
    while not received.endswith(end) and len(received) < most:
        piece = sock.recv(4096)
        if not piece:
            break
        received += piece
    return received


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(web_limits, "MAX_CONNECTIONS", 3)
    monkeypatch.setattr(web_limits, "REQUEST_SECONDS", 20.0)
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(hello, log_level="warning", lifespan="off",
                                           **web_limits.uvicorn_options()))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[listener])))
    thread.start()
    try:
        for _ in range(200):  # a bounded wait for it to start
            if server.started:
                break
            threading.Event().wait(0.05)
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


def test_a_connection_over_the_cap_is_closed_at_once(port: int) -> None:
    with stalled_requests(port, 3), stalled_requests(port, 1, wait=10) as [extra]:
        assert closed_by_server(extra)  # well before the others' 20 s are up


def test_a_kept_alive_connections_next_request_has_a_deadline(
        port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_limits, "REQUEST_SECONDS", 1.0)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert read_until(sock, b"ok").endswith(b"ok")
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
        assert closed_by_server(sock)

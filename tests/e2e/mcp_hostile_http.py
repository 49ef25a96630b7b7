"""A hostile MCP server over HTTP, on 127.0.0.1, in a thread of the test process.

It shakes hands properly (``initialize``; ``server/discover`` is an unknown method, so the
client falls back to the handshake), then answers ``tools/list`` as the test says: an endless
body (a bounded generator: at most :data:`ENDLESS_BYTES`), a small gzip body that unpacks to
far more than any cap, or a ``Content-Length`` of a gigabyte. It counts the bytes it sent.
In mode ``oauth`` it refuses every request as an OAuth resource server does: 401 with
``WWW-Authenticate: Bearer`` and a JSON body ``{"error": "invalid_token", ...}``.
"""

from __future__ import annotations

import functools
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ENDLESS_BYTES = 128 << 20
"""The most an "endless" answer sends (far past the client's cap; never reached by it)."""
UNPACKED_BYTES = 128 << 20
"""What the gzip answer unpacks to."""
_PIECE = (json.dumps({"name": "t", "description": "x" * 900, "inputSchema": {
    "type": "object"}}) + ",").encode() * 64  # about 64 kB of tool entries
_EXPIRED = {"error": "invalid_token", "error_description": "The access token expired"}


class HostileMCP:
    """The server's state: how ``tools/list`` is answered, and what it sent."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sent = 0
        self.methods: list[str] = []
        self._lock = threading.Lock()

    def count(self, size: int) -> None:
        with self._lock:
            self.sent += size


def _handler(state: HostileMCP) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet

        def do_DELETE(self) -> None:  # the client ends its session
            self._send(200, b"", "text/plain")

        def do_GET(self) -> None:  # no stream of server notifications here
            self._send(405, b"", "text/plain")

        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            method = message.get("method", "")
            state.methods.append(method)
            if state.mode == "oauth":
                self._send(401, json.dumps(_EXPIRED).encode(), "application/json",
                           {"WWW-Authenticate": 'Bearer error="invalid_token"'})
            elif "id" not in message:
                self._send(202, b"", "text/plain")
            elif method == "initialize":
                self._answer(message["id"], {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"}})
            elif method == "tools/list":
                self._tools_list()
            else:
                self._json({"jsonrpc": "2.0", "id": message["id"], "error": {
                    "code": -32601, "message": f"no method {method}"}})

        def _answer(self, request_id: Any, result: dict[str, Any]) -> None:
            self._json({"jsonrpc": "2.0", "id": request_id, "result": result})

        def _json(self, body: dict[str, Any]) -> None:
            self._send(200, json.dumps(body).encode(), "application/json",
                       {"mcp-session-id": "s1"})

        def _send(self, status: int, body: bytes, kind: str,
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _tools_list(self) -> None:
            if state.mode == "gzip":
                packed = _bomb()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(packed)))
                self.end_headers()
                self.wfile.write(packed)
                state.count(len(packed))
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if state.mode == "declared":
                self.send_header("Content-Length", str(1 << 30))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._endless(chunked=state.mode != "declared")

        def _endless(self, *, chunked: bool) -> None:
            head = b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": ['
            try:
                for piece in _pieces(head):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked
                                     else piece)
                    state.count(len(piece))
            except OSError:
                return  # the client hung up: what it read is counted
            self.close_connection = True

    return Handler


def _pieces(head: bytes) -> Iterator[bytes]:
    yield head
    for _ in range(ENDLESS_BYTES // len(_PIECE)):
        yield _PIECE


@functools.lru_cache(maxsize=1)
def _bomb() -> bytes:
    """A valid answer listing no tools, padded with spaces, gzipped (packed a piece at a time:
    the test never holds the unpacked body)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip format
    parts = [packer.compress(b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": []')]
    spaces = b" " * (1 << 20)
    parts += [packer.compress(spaces) for _ in range(UNPACKED_BYTES >> 20)]
    parts += [packer.compress(b"}}"), packer.flush()]
    return b"".join(parts)


@contextmanager
def hostile_mcp(mode: str) -> Iterator[tuple[str, HostileMCP]]:
    """The server's ``/mcp`` URL and its state, while the block runs; stopped afterwards."""
    state = HostileMCP(mode)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)

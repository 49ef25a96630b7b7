"""A cap on the MCP sessions one client holds: :class:`SessionsPerClient`, an ASGI wrapper.

The SDK caps the sessions of a whole server (``max_sessions``: past it, 503); one client that
opens sessions and never closes them could take them all. This wrapper, in front of the SDK's
app, counts each client's sessions (a client is a remote address: the bearer token, when there
is one, is the same for every client) and refuses a new one past the cap with 429 and a
message naming it.

A session is counted from the answer that opened it (its ``mcp-session-id``) until the client
ends it (``DELETE``), the server no longer knows it (404), or it has been idle, no request in
flight, for the server's ``session_idle_timeout`` (the SDK closes it then too).
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["SessionsPerClient"]

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]
_SESSION_HEADER = b"mcp-session-id"


class SessionsPerClient:
    """``app``, refusing a client a new session while it holds ``limit`` of them."""

    def __init__(self, app: ASGIApp, *, limit: int, idle_timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._app, self._limit, self._idle_timeout = app, limit, idle_timeout
        self._clock = clock
        self._owners: dict[str, str] = {}  # session id: the client that opened it
        self._in_flight: collections.Counter[str] = collections.Counter()  # by session id
        self._last_seen: dict[str, float] = {}  # session id: when its last request ended
        self._opening: collections.Counter[str] = collections.Counter()  # by client

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        session = _header(scope, _SESSION_HEADER)
        if session is None:
            await self._open(_client(scope), scope, receive, send)
        else:
            await self._serve(session, scope, receive, send)

    def held(self, client: str) -> int:
        """The sessions ``client`` holds, and those it is opening."""
        self._forget_idle()
        return sum(owner == client for owner in self._owners.values()) + self._opening[client]

    async def _open(self, client: str, scope: MutableMapping[str, Any], receive: Any,
                    send: Any) -> None:
        """A request without a session: it opens one if the SDK accepts it."""
        if self.held(client) >= self._limit:
            await _refuse(send, f"too many MCP sessions from {client}: at most {self._limit} "
                          "per client (MAX_SESSIONS_PER_CLIENT); end one (DELETE) first")
            return
        self._opening[client] += 1  # counted now: concurrent openings cannot pass the cap
        opened: list[str] = []

        async def watch(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session = _header(message, _SESSION_HEADER)
                if session is not None:
                    opened.append(session)
                    self._owners[session] = client
                    self._in_flight[session] += 1
            await send(message)

        try:
            await self._app(scope, receive, watch)
        finally:
            self._opening[client] -= 1
            if self._opening[client] <= 0:
                del self._opening[client]
            for session in opened:
                self._ended_request(session, gone=False)

    async def _serve(self, session: str, scope: MutableMapping[str, Any], receive: Any,
                     send: Any) -> None:
        """A request of a session: it may end it (DELETE), or learn it is gone (404)."""
        if session not in self._owners:
            await self._app(scope, receive, send)  # not one we count (the SDK answers 404)
            return
        status: list[int] = []

        async def watch(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        self._in_flight[session] += 1
        try:
            await self._app(scope, receive, watch)
        finally:
            ended = scope.get("method") == "DELETE" and status and status[0] < 400
            self._ended_request(session, gone=bool(ended) or status[:1] == [404])

    def _ended_request(self, session: str, *, gone: bool) -> None:
        self._in_flight[session] -= 1
        self._last_seen[session] = self._clock()
        if gone:
            self._forget(session)

    def _forget_idle(self) -> None:
        """Forget the sessions the SDK closed for idling (no request in flight for long)."""
        now = self._clock()
        for session, seen in list(self._last_seen.items()):
            if self._in_flight[session] <= 0 and now - seen > self._idle_timeout:
                self._forget(session)

    def _forget(self, session: str) -> None:
        self._owners.pop(session, None)
        self._last_seen.pop(session, None)
        self._in_flight.pop(session, None)


def _client(scope: MutableMapping[str, Any]) -> str:
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


def _header(message: MutableMapping[str, Any], name: bytes) -> str | None:
    for key, value in message.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _refuse(send: Any, message: str) -> None:
    """429 with a JSON-RPC error body (no request id), as the SDK's own refusals are shaped."""
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": -32000, "message": message}}).encode()
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

"""A cap on the MCP sessions one client holds: :class:`SessionsPerClient`, an ASGI wrapper.

The SDK caps the sessions of a whole server (``max_sessions``: past it, 503); one client that
opens sessions and never closes them could take them all. This wrapper, in front of the SDK's
app, counts each client's sessions (a client is a remote address: the bearer token, when there
is one, is the same for every client). A client at the cap that opens one more gets it, and its
least recently used idle session (no request in flight) is ended as the client would end it: a
``DELETE`` through the SDK's app. Many clients never send that ``DELETE`` (the official
TypeScript SDK's ``Client.close()`` does not), so refusing would lock them out until their
sessions idled away. Only when every session of the client is busy is the new one refused, with
429 and a message naming the cap.

A session is counted from the answer that opened it (its ``mcp-session-id``) until the client
ends it (``DELETE``), the server no longer knows it (404), it is ended here to make room, or it
has been idle, no request in flight, for the server's ``session_idle_timeout`` (the SDK closes
it then too).
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["SessionsPerClient"]

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]
Message = MutableMapping[str, Any]
_SESSION_HEADER = b"mcp-session-id"
_KEPT_FOR_DELETE = (b"host", b"origin", b"authorization")  # what the SDK checks on a DELETE


class SessionsPerClient:
    """``app``, holding each client to ``limit`` sessions by ending its least recently used
    idle one when it opens another, and refusing it only when all of them are busy."""

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
        self._opening[client] += 1  # counted now: concurrent openings cannot pass the cap
        counted = [True]

        def opened() -> None:  # from now on the session itself is counted, or none is
            if counted:
                counted.clear()
                self._opening[client] -= 1
                if self._opening[client] <= 0:
                    del self._opening[client]

        if self.held(client) > self._limit:
            refusal = await self._end_least_recent(client, scope)
            if refusal is not None:
                opened()
                for message in refusal:
                    await send(message)
                return
        sessions: list[str] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                session = _header(message, _SESSION_HEADER)
                if session is not None and message["status"] < 400:
                    sessions.append(session)
                    self._owners[session] = client
                    self._in_flight[session] += 1
                opened()
            await send(message)

        try:
            await self._app(scope, receive, watch)
        finally:
            opened()
            for session in sessions:
                self._ended_request(session, gone=False)

    async def _end_least_recent(self, client: str, scope: MutableMapping[str, Any]
                                ) -> list[Message] | None:
        """End ``client``'s least recently used idle session to make room: ``None`` once
        ended, else the answer to give the new request instead (429 when every session is
        busy; the SDK's refusal when it would not end it, e.g. for this request's ``Host``)."""
        idle = [session for session, owner in self._owners.items()
                if owner == client and self._in_flight[session] <= 0]
        if not idle:
            return _too_many(f"too many MCP sessions from {client}: at most {self._limit} per "
                             "client (MAX_SESSIONS_PER_CLIENT), each with a request in flight; "
                             "end one (DELETE) first")
        victim = min(idle, key=lambda session: self._last_seen.get(session, 0.0))
        seen = self._last_seen.get(victim, 0.0)
        self._forget(victim)  # at once: a concurrent opening picks another one
        answer = await _delete(self._app, scope, victim)
        status = answer[0]["status"] if answer else 500
        if status < 400 or status == 404:  # ended, or already gone
            return None
        self._owners[victim], self._last_seen[victim] = client, seen
        return answer

    async def _serve(self, session: str, scope: MutableMapping[str, Any], receive: Any,
                     send: Any) -> None:
        """A request of a session: it may end it (DELETE), or learn it is gone (404)."""
        if session not in self._owners:
            await self._app(scope, receive, send)  # not one we count (the SDK answers 404)
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
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
        if session not in self._owners:  # ended meanwhile (to make room): nothing to count
            return
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


async def _delete(app: ASGIApp, scope: MutableMapping[str, Any], session: str
                  ) -> list[Message]:
    """What ``app`` answers a ``DELETE`` of ``session`` sent with the ``Host``, ``Origin`` and
    credentials of the request in ``scope`` (so it passes the same checks, no others)."""
    headers = [(key, value) for key, value in scope.get("headers") or []
               if key.lower() in _KEPT_FOR_DELETE]
    request = {**scope, "method": "DELETE", "query_string": b"",
               "headers": [*headers, (_SESSION_HEADER, session.encode("latin-1"))]}
    answer: list[Message] = []
    received = [False]

    async def receive() -> Message:
        if received[0]:
            return {"type": "http.disconnect"}
        received[0] = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        answer.append(message)

    await app(request, receive, send)
    return answer


def _client(scope: MutableMapping[str, Any]) -> str:
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


def _header(message: MutableMapping[str, Any], name: bytes) -> str | None:
    for key, value in message.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _too_many(message: str) -> list[Message]:
    """429 with a JSON-RPC error body (no request id), as the SDK's own refusals are shaped."""
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": -32000, "message": message}}).encode()
    return [{"type": "http.response.start", "status": 429,
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]},
            {"type": "http.response.body", "body": body}]

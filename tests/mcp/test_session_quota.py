"""The per-client session cap of mcp-serve, in front of an ASGI app that opens sessions like
the SDK's (an ``mcp-session-id`` on the answer to a request without one; 404 once gone)."""

from __future__ import annotations

import itertools
import json
from collections.abc import MutableMapping
from typing import Any

from miniagent.mcp.session_quota import SessionsPerClient


class Sessions:
    """The app behind the cap: it opens a session per request without one, ends it on DELETE."""

    def __init__(self) -> None:
        self.live: set[str] = set()
        self._numbers = itertools.count(1)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        given = dict(scope["headers"]).get(b"mcp-session-id")
        headers: list[tuple[bytes, bytes]] = []
        if given is None:
            session = f"s{next(self._numbers)}"
            self.live.add(session)
            status, headers = 200, [(b"mcp-session-id", session.encode())]
        elif given.decode() not in self.live:
            status = 404
        else:
            status = 200
            if scope["method"] == "DELETE":
                self.live.discard(given.decode())
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


async def request(app: Any, client: str, method: str = "POST",
                  session: str | None = None) -> tuple[int, dict[str, str], bytes]:
    scope = {"type": "http", "method": method, "client": (client, 50000),
             "headers": [(b"mcp-session-id", session.encode())] if session else []}
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, None, send)
    headers = {k.decode(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


async def test_sessions_count_until_deleted_gone_or_idle() -> None:
    now = [0.0]
    backend = Sessions()
    app = SessionsPerClient(backend, limit=2, idle_timeout=60, clock=lambda: now[0])
    first = [(await request(app, "10.0.0.1"))[1]["mcp-session-id"] for _ in range(2)]
    status, _, body = await request(app, "10.0.0.1")
    assert status == 429 and "at most 2 per client" in json.loads(body)["error"]["message"]
    assert (await request(app, "10.0.0.2"))[0] == 200  # another client
    assert (await request(app, "10.0.0.1", "DELETE", first[0]))[0] == 200
    assert (await request(app, "10.0.0.1"))[0] == 200  # ended: room for one more
    assert (await request(app, "10.0.0.1"))[0] == 429
    backend.live.discard(first[1])  # the server dropped it: the client learns it on a 404
    assert (await request(app, "10.0.0.1", "GET", first[1]))[0] == 404
    assert (await request(app, "10.0.0.1"))[0] == 200
    assert (await request(app, "10.0.0.1"))[0] == 429
    now[0] += 61  # every session idle past the timeout (the SDK closes them then)
    assert (await request(app, "10.0.0.1"))[0] == 200

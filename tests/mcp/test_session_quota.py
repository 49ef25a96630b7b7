"""The per-client session cap of mcp-serve, in front of an ASGI app that opens sessions like
the SDK's (an ``mcp-session-id`` on the answer to a request without one; 404 once gone)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import MutableMapping
from typing import Any

from miniagent.mcp.session_quota import SessionsPerClient


class Sessions:
    """The app behind the cap: it opens a session per request without one, ends it on DELETE;
    a GET of a session waits until ``release`` is set (a stream held open: a busy session),
    and says so through :meth:`streaming`."""

    def __init__(self) -> None:
        self.live: set[str] = set()
        self.release = asyncio.Event()
        self._numbers = itertools.count(1)
        self._streams: dict[str, asyncio.Event] = {}

    def streaming(self, session: str) -> asyncio.Event:
        """Set once a GET of ``session`` holds its stream open."""
        return self._streams.setdefault(session, asyncio.Event())

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        await asyncio.sleep(0)  # as a real app would: concurrent requests interleave
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
            elif scope["method"] == "GET":
                self.streaming(given.decode()).set()
                await self.release.wait()
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


async def open_session(app: Any, client: str = "10.0.0.1") -> str:
    status, headers, _ = await request(app, client)
    assert status == 200
    return headers["mcp-session-id"]


async def test_sessions_count_until_deleted_gone_or_idle() -> None:
    now = [0.0]
    backend = Sessions()
    app = SessionsPerClient(backend, limit=2, idle_timeout=60, clock=lambda: now[0])
    first = [await open_session(app) for _ in range(2)]
    assert app.held("10.0.0.1") == 2 and app.held("10.0.0.2") == 0
    assert (await request(app, "10.0.0.1", "DELETE", first[0]))[0] == 200
    assert app.held("10.0.0.1") == 1  # ended by the client: room without ending another
    backend.live.discard(first[1])  # the server dropped it: the client learns it on a 404
    assert (await request(app, "10.0.0.1", "GET", first[1]))[0] == 404
    assert app.held("10.0.0.1") == 0
    second = [await open_session(app) for _ in range(2)]
    now[0] += 61  # every session idle past the timeout (the SDK closes them then)
    assert app.held("10.0.0.1") == 0
    await open_session(app)
    assert set(second) <= backend.live  # forgotten, not ended here: the SDK ends those


async def test_at_the_cap_the_least_recently_used_idle_session_is_ended() -> None:
    """Clients that never DELETE (the TypeScript SDK's close()) are not locked out."""
    now = [0.0]
    backend = Sessions()
    app = SessionsPerClient(backend, limit=3, idle_timeout=60, clock=lambda: now[0])
    sessions = []
    for _ in range(3):
        now[0] += 1
        sessions.append(await open_session(app))
    other = await open_session(app, "10.0.0.2")
    now[0] += 1
    assert (await request(app, "10.0.0.1", "POST", sessions[0]))[0] == 200  # used again
    for _ in range(14):  # 17 sessions opened from one client in all, none ended by it
        now[0] += 1
        sessions.append(await open_session(app))
        assert app.held("10.0.0.1") == 3
    assert backend.live == {*sessions[-3:], other}
    assert sessions[1] not in backend.live and sessions[0] not in backend.live
    assert (await request(app, "10.0.0.1", "POST", sessions[1]))[0] == 404
    assert (await request(app, "10.0.0.1", "POST", sessions[-1]))[0] == 200


async def test_the_order_is_least_recently_used_not_oldest() -> None:
    now = [0.0]
    backend = Sessions()
    app = SessionsPerClient(backend, limit=2, idle_timeout=60, clock=lambda: now[0])
    first, second = await open_session(app), await open_session(app)
    now[0] += 1
    assert (await request(app, "10.0.0.1", "POST", first))[0] == 200
    third = await open_session(app)
    assert backend.live == {first, third} and second not in backend.live


async def test_a_busy_session_is_never_ended() -> None:
    backend = Sessions()
    app = SessionsPerClient(backend, limit=2, idle_timeout=60)
    first, second = await open_session(app), await open_session(app)
    streams = [asyncio.create_task(request(app, "10.0.0.1", "GET", first))]
    await asyncio.wait_for(backend.streaming(first).wait(), 10)  # first is busy now
    third = await open_session(app)  # second, idle, is ended although first is older
    assert backend.live == {first, third} and second not in backend.live
    streams.append(asyncio.create_task(request(app, "10.0.0.1", "GET", third)))
    await asyncio.wait_for(backend.streaming(third).wait(), 10)
    status, _, body = await request(app, "10.0.0.1")
    assert status == 429 and backend.live == {first, third}
    assert json.loads(body)["error"]["message"] == (
        "too many MCP sessions from 10.0.0.1: at most 2 per client (MAX_SESSIONS_PER_CLIENT), "
        "each with a request in flight; end one (DELETE) first")
    backend.release.set()
    assert [status for status, _, _ in await asyncio.gather(*streams)] == [200, 200]
    await open_session(app)
    assert len(backend.live) == 2 and app.held("10.0.0.1") == 2


async def test_concurrent_openings_at_the_cap_end_one_session_each() -> None:
    backend = Sessions()
    app = SessionsPerClient(backend, limit=2, idle_timeout=60)
    old = {await open_session(app), await open_session(app)}
    new = await asyncio.gather(open_session(app), open_session(app))
    assert backend.live == set(new) and not old & backend.live
    assert app.held("10.0.0.1") == 2

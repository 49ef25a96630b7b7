"""Event streams are bounded: at most ``MAX_STREAMS`` open at once, and a stream whose client
went away (even before the first byte) no longer counts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from miniagent import InMemoryStore
from miniagent.core.session import AgentSession
from miniagent.ui import app
from miniagent.ui.server import MAX_STREAMS


def _request(path: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
            "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:8321")], "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8321)}


async def _status(inbox: Any, path: str, *, hold: asyncio.Event | None = None) -> int:
    """The status of ``path``; with ``hold``, the client then stops reading (its next read
    waits for ``hold``) and the stream stays open until it is set; else the client leaves after
    the status."""
    statuses: list[int] = []
    told = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await (hold.wait() if hold is not None else asyncio.Event().wait())
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
            told.set()
            if hold is None:
                raise OSError("the client has gone")
        elif hold is not None:
            await hold.wait()  # a client that does not read: the write waits
            raise OSError("the client has gone")

    run = asyncio.ensure_future(inbox(_request(path), receive, send))
    await told.wait()
    if hold is None:
        await asyncio.gather(run, return_exceptions=True)
    else:
        _HELD.append(run)
    return statuses[0]


_HELD: list[asyncio.Future[Any]] = []


async def _gone_at_once(inbox: Any, path: str) -> int:
    """A client that leaves as the answer starts (the server's write fails): the status the
    server began to answer with."""
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client sends nothing more
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
            raise OSError("the client has gone")

    try:
        await inbox(_request(path), receive, send)
    except OSError:
        pass
    except Exception as exc:  # Starlette's ClientDisconnect wraps the OSError
        assert "Disconnect" in type(exc).__name__, exc
    return statuses[0]


def test_streams_of_clients_gone_before_the_first_byte_are_not_counted() -> None:
    store = InMemoryStore()
    store.save(AgentSession.start("q", id="a", at=1.0))
    inbox = app(store=store)

    async def many() -> list[int]:
        return [await _gone_at_once(inbox, path)
                for _ in range(MAX_STREAMS + 6) for path in ("/events", "/sessions/a/events")]

    statuses = asyncio.run(many())
    assert statuses == [200] * len(statuses)  # never "too many pages follow sessions" (503)


def test_open_streams_are_bounded_and_freed_when_their_clients_go(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from miniagent.ui import server

    monkeypatch.setattr(server, "MAX_STREAMS", 2)
    store = InMemoryStore()
    store.save(AgentSession.start("q", id="a", at=1.0))
    inbox = app(store=store)

    async def scenario() -> list[int]:
        hold = asyncio.Event()
        held = [await _status(inbox, "/sessions/a/events", hold=hold),
                await _status(inbox, "/events", hold=hold)]  # two clients that never read
        refused = await _status(inbox, "/events")
        hold.set()  # they go away
        await asyncio.gather(*_HELD, return_exceptions=True)
        _HELD.clear()
        return [*held, refused, await _status(inbox, "/events")]

    assert asyncio.run(scenario()) == [200, 200, 503, 200]

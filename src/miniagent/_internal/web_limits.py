"""What one HTTP client may hold on the servers miniagent runs with uvicorn (the inbox,
``mcp-serve --http``): each request must arrive whole within :data:`REQUEST_SECONDS`, and at
most :data:`MAX_CONNECTIONS` connections are open at once.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) but not a request that
never ends its head or its body, and its ``limit_concurrency`` answers 503 only once a head
has arrived: a client sending a request a byte at a time (slowloris) would hold a socket
forever. :class:`BoundedH11Protocol` is uvicorn's h11 protocol with a deadline on each request's
arrival (armed when the connection opens and after each answer, cleared once the request is
whole) and a cap on connections (one over it is closed as soon as it is accepted). An answer
that streams for long (a page following a session) is not cut: only the request's arrival is
timed. Imports uvicorn and h11: load it only to serve.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["MAX_CONNECTIONS", "REQUEST_SECONDS", "BoundedH11Protocol", "uvicorn_options"]

REQUEST_SECONDS = 10.0
"""How long a request's head and body may take to arrive (a form or a JSON-RPC message takes
milliseconds)."""

MAX_CONNECTIONS = 256
"""Connections open at once; one more is closed as soon as it is accepted."""

_ARRIVING = (h11.IDLE, h11.SEND_BODY)
"""The client's h11 states while its request has not arrived whole."""


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's arrival and a connection cap."""

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:
            transport.close()  # connection_lost forgets it
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state not in _ARRIVING:
            self._disarm()  # the request is whole (or the connection ends)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state in _ARRIVING:
            self._arm()  # the next request on this connection has its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(REQUEST_SECONDS, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.conn.their_state in _ARRIVING and not self.transport.is_closing():
            self.transport.close()


def uvicorn_options() -> dict[str, Any]:
    """The ``uvicorn.Config`` options that apply these bounds."""
    return {"http": BoundedH11Protocol, "timeout_keep_alive": 5}

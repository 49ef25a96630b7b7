"""What the testing servers share: listening on a loopback address, one task per connection
that stop() drops, a run in a thread of their own, and reading an HTTP/1.1 request.

A server (:class:`~miniagent.testing.stub_server.StubServer`,
:class:`~miniagent.testing.fault_proxy.FaultProxy`) subclasses :class:`LoopbackServer` and
says how it answers the requests of one connection (``_converse``).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["LoopbackServer", "Request", "read_request"]

_Server = TypeVar("_Server", bound="LoopbackServer")


@dataclass(kw_only=True)
class Request:
    """One HTTP request as read off a connection."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-case names."""
    body: bytes


class LoopbackServer:
    """A server of HTTP connections on ``host:port`` (port 0: a free one, set by start()).

    Use it in the running event loop (``async with server:`` or start()/stop()), or in a
    daemon thread with a loop of its own (``with server.run_in_thread() as server:``).
    """

    _thread_name = "miniagent-loopback-server"

    def __init__(self, *, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> Self:
        """Start listening (in the running event loop)."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def run_in_thread(self) -> _Threaded[Self]:
        """A context manager that runs the server in its own event loop, in a daemon thread,
        while its block runs; ``with`` gives the started server."""
        return _Threaded(self)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._converse(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            # stop() drops the connection. The handler is the task's outermost frame, so it
            # ends here instead of as "cancelled", which asyncio's stream callback (3.11)
            # would report with a traceback at shutdown.
            pass
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the requests of one connection until it is to close."""
        raise NotImplementedError


class _Threaded(Generic[_Server]):
    """Runs a :class:`LoopbackServer` in a daemon thread with its own event loop."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Server:
        started = threading.Event()
        failures: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self.server.start())
            except BaseException as exc:  # reported to the caller's thread below
                failures.append(exc)
                self._loop.close()
                return
            finally:
                started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.server.stop())
            self._loop.close()

        self._thread = threading.Thread(target=run, name=self.server._thread_name, daemon=True)
        self._thread.start()
        started.wait(30)
        if failures:
            raise failures[0]
        return self.server

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection, or None when the client closed it."""
    try:
        block = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    lines = block.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked_body(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method=method, path=path, headers=headers, body=body)


async def _read_chunked_body(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    while await reader.readuntil(b"\r\n") != b"\r\n":
        pass
    return b"".join(parts)

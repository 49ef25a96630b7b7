"""One live connection to an MCP server, held open by a task of its own.

The SDK's ``Client`` is an async context manager whose task groups must be entered and left
by the same task. A run calls tools from many tasks (each call runs in its own) and closes its
sources from yet another, so the client lives in a holder task: it enters the client, hands it
out, and waits until :meth:`Connection.close` asks it to leave. Requests themselves may be sent
from any task. When the event loop ends (``asyncio.run`` returns) the holder is cancelled and
the SDK still stops the server process: its shutdown is shielded and bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Callable
from typing import IO, Any, TextIO, cast

from miniagent.errors import ConfigError
from miniagent.mcp.config import ServerConfig

__all__ = ["Connection", "sdk"]

def sdk() -> Any:
    """The ``mcp`` package, or a clear error telling how to install it."""
    try:
        import mcp
    except ImportError:
        raise ConfigError("MCP servers need the mcp SDK: pip install 'miniagent[mcp]'") from None
    return mcp


class Connection:
    """A client session with one server, open until :meth:`close` (or the loop's end)."""

    def __init__(self, config: ServerConfig, on_tools_changed: Callable[[], None],
                 errlog: IO[str] | int | None = None) -> None:
        self.config = config
        self._on_tools_changed = on_tools_changed
        self._errlog = errlog
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        self.client: Any = None

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stop.is_set()

    async def open(self) -> Any:
        """Start the server (or reach it) and shake hands, within ``connect_timeout``.

        Raises:
            TimeoutError, OSError, the SDK's errors: the server could not be reached.
        """
        ready: asyncio.Future[Any] = self.loop.create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp {self.config.label}")
        try:
            self.client = await asyncio.wait_for(asyncio.shield(ready),
                                                 self.config.connect_timeout)
        except BaseException:
            await self.close()
            raise
        return self.client

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        try:
            async with self._client() as client:
                listener = asyncio.create_task(self._listen(client))
                ready.set_result(client)
                try:
                    await self._stop.wait()
                finally:
                    listener.cancel()
                    with contextlib.suppress(BaseException):
                        await listener
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(
                    f"connecting to the MCP server {self.config.label} was interrupted"))
            if not isinstance(exc, Exception):
                raise

    async def _on_message(self, message: Any) -> None:
        """Notifications on a handshake-era connection (before 2026-07-28)."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._on_tools_changed()

    async def _listen(self, client: Any) -> None:
        """Change events on a 2026-07-28 connection, which come through a subscription."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._on_tools_changed()
        except Exception:
            return  # an older connection (see _on_message), or a server that cannot listen

    def _client(self) -> Any:
        mcp = sdk()
        config = self.config.expanded()
        options: dict[str, Any] = {"message_handler": self._on_message,
                                   "read_timeout_seconds": config.call_timeout}
        if config.transport == "stdio":
            params = mcp.StdioServerParameters(command=str(config.command),
                                               args=list(config.args),
                                               env=dict(config.env) if config.env else None,
                                               cwd=config.cwd)
            from mcp.client.stdio import stdio_client

            # anyio.open_process takes a file or subprocess.DEVNULL for the server's stderr
            errlog = cast(TextIO, _stderr() if self._errlog is None else self._errlog)
            return mcp.Client(stdio_client(params, errlog=errlog), **options)
        return mcp.Client(_http_transport(config), **options)

    async def close(self) -> None:
        """Leave the client (the SDK stops a stdio server; bounded); safe to call twice."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 15)
        except asyncio.TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except Exception:
            pass  # the holder failed while leaving: nothing more to release here


def _stderr() -> IO[str] | int:
    """Our stderr for the server's, when it is a real file; else the process's own stream
    (pytest and notebooks replace ``sys.stderr`` with objects a child cannot write to)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    return subprocess.DEVNULL


def _http_transport(config: ServerConfig) -> Any:
    """Streamable HTTP with the configured headers, on an HTTP client the SDK configures."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # the SDK's own defaults: 30 s to connect and write, 300 s to read (a stream may idle)
    http = httpx2.AsyncClient(headers=dict(config.headers or {}),
                              timeout=httpx2.Timeout(30.0, read=300.0))
    return _OwnedHttp(streamable_http_client(str(config.url), http_client=http), http)


class _OwnedHttp:
    """The HTTP transport, closing the HTTP client it was given when it ends."""

    def __init__(self, transport: Any, http: Any) -> None:
        self._transport, self._http = transport, http

    async def __aenter__(self) -> Any:
        await self._http.__aenter__()
        try:
            return await self._transport.__aenter__()
        except BaseException:
            await self._http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._transport.__aexit__(*exc)
        finally:
            await self._http.__aexit__(None, None, None)

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
import logging
from collections.abc import AsyncIterator, Callable
from typing import IO, Any, TextIO, cast

from miniagent.core.errors import ConfigError
from miniagent.mcp.config import ServerConfig
from miniagent.mcp.stderr import StderrTail

__all__ = ["Connection", "ServerError", "sdk"]

_NOT_MCP_SHOWN = 80  # characters of a server's first line that is not MCP, in messages

def sdk() -> Any:
    """The ``mcp`` package, or a clear error telling how to install it."""
    try:
        import mcp
    except ImportError:
        raise ConfigError("MCP servers need the mcp SDK: pip install 'miniagent[mcp]'") from None
    return mcp


class ServerError(Exception):
    """What a server did wrong, said in full (shown as it is, after the server's name)."""


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
        self._stderr: StderrTail | None = None  # a stdio server's, once it is started
        self._not_mcp: str | None = None  # the first line it wrote that is not MCP

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stop.is_set()

    @property
    def exited(self) -> bool:
        """Whether a stdio server's process has ended (its stderr closed), though the session
        may not have noticed yet; False for a server reached over HTTP (nothing tells)."""
        return self._stderr is not None and self._stderr.ended

    async def open(self) -> Any:
        """Start the server (or reach it) and shake hands, within ``connect_timeout``.

        Raises:
            ServerError: the server exited at start, or wrote output that is not MCP.
            TimeoutError, OSError, the SDK's errors: the server could not be reached.
        """
        ready: asyncio.Future[Any] = self.loop.create_future()
        # the holder may fail it after we stopped waiting: that failure is told below
        ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp {self.config.label}")
        try:
            self.client = await asyncio.wait_for(asyncio.shield(ready),
                                                 self.config.connect_timeout)
        except Exception:
            trouble = self.trouble()
            await self.close()
            if trouble:
                raise ServerError(trouble) from None
            raise
        except BaseException:
            await self.close()
            raise
        return self.client

    async def settle(self) -> None:
        """Wait a moment (a quarter second at most) for a stdio server's stderr to end."""
        if self._stderr is not None:
            await self._stderr.wait_end(0.25)

    def trouble(self) -> str | None:
        """What went wrong with the server, as far as its output tells: output that is not
        MCP, or an exit (with the last lines of its stderr); None when nothing tells."""
        told = []
        if self._not_mcp is not None:
            told.append(f"it wrote output that is not MCP on its stdout ({self._not_mcp!r}): "
                        "it is not an MCP server, or it logs to stdout"
                        if self.config.transport == "stdio" else
                        f"it sent a message that is not MCP ({self._not_mcp!r})")
        tail = self._stderr
        if tail is not None and tail.ended:
            lines = tail.last_lines()
            told.append("it exited" + (f"; its stderr ends: {' | '.join(lines)}" if lines
                                       else ", writing nothing on stderr"))
        return "; ".join(told) or None

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
        """Notifications on a handshake-era connection (before 2026-07-28), and the errors
        of the transport (a line of a stdio server's output that is not MCP)."""
        if isinstance(message, ValueError) and self._not_mcp is None:
            self._not_mcp = _not_mcp_line(message)
        elif getattr(message, "method", None) == "notifications/tools/list_changed":
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
        quiet_sdk_tracebacks()
        config = self.config.expanded()
        options: dict[str, Any] = {"message_handler": self._on_message,
                                   "read_timeout_seconds": config.call_timeout}
        if config.transport == "stdio":
            params = mcp.StdioServerParameters(command=str(config.command),
                                               args=list(config.args),
                                               env=dict(config.env) if config.env else None,
                                               cwd=config.cwd)
            return mcp.Client(self._stdio(params), **options)
        return mcp.Client(_http_transport(config), **options)

    @contextlib.asynccontextmanager
    async def _stdio(self, params: Any) -> AsyncIterator[Any]:
        """The SDK's stdio transport, the server's stderr going through a :class:`StderrTail`
        (passed on to ``errlog``, its end kept for messages)."""
        from mcp.client.stdio import stdio_client

        tail = StderrTail(self._errlog)
        write_end = await tail.open()
        try:
            # anyio.open_process takes a file descriptor for the server's stderr
            async with stdio_client(params, errlog=cast(TextIO, write_end)) as streams:
                tail.spawned()  # the server holds the write end now
                self._stderr = tail
                try:
                    yield streams
                except Exception:
                    # the session failed (at start: "Connection closed"): if the server
                    # exited, its stderr ends about now, before the SDK stops it
                    await tail.wait_end(0.25)
                    raise
                finally:
                    tail.stopping()
        finally:
            tail.spawned()
            try:
                await tail.wait_end(0.5)  # what the server wrote while stopping, passed on
            finally:
                tail.close()

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


def _not_mcp_line(error: ValueError) -> str:
    """The start of the line a stdio server wrote that is not MCP (pydantic's error keeps it)."""
    errors = getattr(error, "errors", None)
    try:
        line = errors()[0].get("input") if callable(errors) else None
    except (IndexError, TypeError, ValueError):
        line = None
    text = line if isinstance(line, str) else str(error)
    return " ".join(text.split())[:_NOT_MCP_SHOWN]


def _http_transport(config: ServerConfig) -> Any:
    """Streamable HTTP with the configured headers, on our bounded HTTP client."""
    from mcp.client.streamable_http import streamable_http_client

    from miniagent.mcp.http import MAX_RESPONSE_BYTES, http_client

    http = http_client(config.headers)
    # one cap on one answer, whether it comes whole or as an event of a stream
    return _OwnedHttp(streamable_http_client(str(config.url), http_client=http,
                                             max_sse_event_size=MAX_RESPONSE_BYTES), http)


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


class _QuietTraceback(logging.Filter):
    """The SDK logs a traceback with errors we report ourselves, in one line (a too-large
    answer, a line of a stdio server's output that is not MCP): such records keep their
    message at DEBUG level, without the traceback."""

    def __init__(self, message: str, kinds: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.message, self._kinds = message, kinds

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.getMessage() == self.message and isinstance(error, self._kinds):
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def quiet_sdk_tracebacks() -> None:
    """Install the filters (once) on the SDK's transport loggers."""
    from miniagent.mcp.http import ResponseTooLarge

    for name, message, kinds in (
            ("mcp.client.streamable_http", "Error parsing JSON response", (ResponseTooLarge,)),
            ("mcp.client.streamable_http", "Error parsing SSE message", (ValueError,)),
            ("mcp.client.stdio", "Failed to parse JSONRPC message from server", (ValueError,))):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietTraceback) and f.message == message
                   for f in logger.filters):  # one filter per message, installed once
            logger.addFilter(_QuietTraceback(message, kinds))


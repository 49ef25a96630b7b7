"""A small async HTTP/1.1 client on raw asyncio streams, for model servers.

Why not httpx or aiohttp: measured on this project's machine, httpx's async pool reached
~3% of the ideal throughput at 200 concurrent requests (its pool bookkeeping grows with
the number of connections), and aiohttp takes ~210 ms to import. Model servers speak a
tiny subset of HTTP (JSON POSTs, keep-alive, sometimes chunked answers), which fits here.

What it does:

- a keep-alive pool per origin ``(scheme, host, port)``: a deque of idle connections,
  O(1) to take and give back, at most ``max_connections`` open per origin;
- request bodies with ``Content-Length``; responses delimited by ``Content-Length``,
  ``Transfer-Encoding: chunked`` or the server closing the connection, each read up to
  ``max_body_bytes`` (32 MiB by default: a server that never stops sending costs that
  much memory at most);
- ``https`` through :func:`ssl.create_default_context`;
- a pooled connection the server has closed meanwhile is retried once, transparently,
  on a fresh connection (only when no byte of the answer had arrived);
- streaming: with a ``sink``, the body of a 2xx answer is handed over piece by piece as it
  arrives (server-sent events), under the same ``max_body_bytes`` cap and ``timeout``; the
  sink can stop the reading early (the connection is then closed, not pooled).

Errors: :class:`~miniagent.core.errors.ModelConnectionError` for transport faults,
:class:`~miniagent.core.errors.ModelTimeout` when ``timeout`` passes and
:class:`~miniagent.core.errors.ModelResponseError` for a body over ``max_body_bytes`` (the
connection is then closed, not pooled; retrying would only fetch it again). Any HTTP status is
returned, not raised: deciding what a 429 or a 500 means is the caller's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from miniagent.core.errors import ModelConnectionError, ModelResponseError, ModelTimeout

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodySink", "HttpClient", "HttpResponse"]

DEFAULT_MAX_BODY_BYTES = 32 << 20
"""The default cap on a response body: far above any chat completion (1 MiB is a long one)."""

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
BodySink = Callable[[bytes], "bool | str"]
"""Receives each piece of a streamed 2xx body; returns True to stop reading (the connection is
closed), :data:`END` when it has the whole answer (the rest is read only briefly, so that the
connection can stay), False to go on."""
END = "end"
_Origin = tuple[str, str, int]
_READ_LIMIT = 1 << 20  # longest header block or chunk-size line accepted
_TRANSPORT_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)
_CLOSE_READ = 1 << 16  # bytes asked for at a time from a body delimited by the close
_DIGITS = re.compile(rb"[0-9]+")
_HEX_DIGITS = re.compile(rb"[0-9A-Fa-f]+")


@dataclass(kw_only=True, slots=True)
class HttpResponse:
    """An HTTP answer, fully read.

    Attributes:
        status: The status code.
        headers: Header names in lower case; repeated headers joined with ``", "``.
        body: The body bytes (chunked encoding already removed).
    """

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        """Decode the body as JSON (raises :class:`ValueError` when it is not JSON, or nests
        deeper than the decoder can go)."""
        try:
            return json.loads(self.body)
        except RecursionError:
            raise ValueError("the body nests too deeply to decode") from None

    def text(self) -> str:
        """The body decoded as UTF-8, undecodable bytes replaced."""
        return self.body.decode("utf-8", "replace")


class _ProtocolError(Exception):
    """The server sent something that is not HTTP/1.x."""


class _StaleConnection(Exception):
    """A reused connection failed before any byte of the answer arrived."""


class _BodyTooLarge(Exception):
    """The answer's body is (or says it will be) longer than the client's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer's body is over the {limit:,} byte limit (max_body_bytes)")


class _Slots:
    """A counting semaphore with O(1) acquire and release.

    ``asyncio.Semaphore`` (3.11, 3.12) scans its waiters on every acquire, which turns
    thousands of queued requests into quadratic work.
    """

    __slots__ = ("free", "waiters")

    def __init__(self, size: int) -> None:
        self.free = size
        self.waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> None:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, then cancelled: hand it on
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Hand the slot to the first live waiter, or put it back."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():  # cancelled waiters are skipped here, in O(1) each
                waiter.set_result(None)
                return
        self.free += 1


@dataclass(slots=True)
class _Pool:
    """Idle connections to one origin, and the cap on open ones."""

    origin: _Origin
    loop: asyncio.AbstractEventLoop
    slots: _Slots
    idle: deque[_Conn] = field(default_factory=deque)

    def take(self) -> _Conn | None:
        """An idle connection that still looks open, or None."""
        while self.idle:
            conn = self.idle.pop()  # most recently used: least likely to be timed out
            if not conn[0].at_eof() and not conn[1].is_closing():
                return conn
            conn[1].close()
        return None


@lru_cache(maxsize=256)
def _split_url(url: str) -> tuple[_Origin, str, str]:
    """``(origin, request target, Host header)`` of an http(s) URL."""
    from urllib.parse import urlsplit  # once per URL (cached): not with ``import miniagent``

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    default = 443 if scheme == "https" else 80
    port = parts.port or default
    host = parts.hostname
    host_header = f"[{host}]" if ":" in host else host
    if port != default:
        host_header = f"{host_header}:{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (scheme, host, port), target, host_header


def _head(method: str, target: str, host: str, headers: dict[str, str], length: int) -> bytes:
    before, after = _head_around_length(method, target, host, tuple(headers.items()))
    return before + str(length).encode() + after


@lru_cache(maxsize=256)
def _head_around_length(method: str, target: str, host: str, headers: tuple[tuple[str, str], ...]
                        ) -> tuple[bytes, bytes]:
    """A request's header block, before and after its length: the same on every request of a
    model, so it is built once (a line break in a header is refused, every time)."""
    lines = []
    if "content-type" not in {k.lower() for k, _ in headers}:
        lines.append("Content-Type: application/json")
    for name, value in headers:
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"line break in HTTP header {name!r}")
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    before = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: "
    return before.encode("latin-1"), ("\r\n" + "\r\n".join(lines)).encode("latin-1")


def _describe(exc: BaseException, origin: _Origin) -> str:
    where = f"{origin[1]}:{origin[2]}"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused by {where}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {origin[1]!r} ({exc.strerror or exc})"
    if isinstance(exc, asyncio.IncompleteReadError):
        return f"{where} closed the connection before a complete answer"
    if isinstance(exc, ConnectionResetError):
        return f"connection reset by {where}"
    if isinstance(exc, _ProtocolError):
        return f"malformed HTTP answer from {where}: {exc}"
    return f"{type(exc).__name__} talking to {where}: {exc}"


def _parse_head(block: bytes) -> tuple[int, str, dict[str, str]]:
    """Status, HTTP version and headers of one header block."""
    lines = block.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not _DIGITS.fullmatch(code.encode()):
        raise _ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    repeated: dict[str, list[str]] = {}  # a header sent more than once: all its values
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key, value = name.strip().lower(), value.strip()
            if key not in headers:
                headers[key] = value
            elif key in repeated:
                repeated[key].append(value)
            else:
                repeated[key] = [headers[key], value]
    # Joined once: appending to a growing string made 170,000 repeats of one header (a
    # 1 MiB head) cost 1.6 s of CPU, blocking the event loop.
    for key, parts in repeated.items():
        headers[key] = ", ".join(parts)
    return int(code), version, headers


async def _read_chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
    """A chunked body, counted as it comes: chunk data, and the size lines and trailers
    too (a server sending endless tiny chunks or trailers is cut off all the same)."""
    body = bytearray()  # not a list of chunks: a million 1-byte chunks would cost ~50 MB
    framing = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        framing += len(line)
        size_text = line.split(b";", 1)[0].strip()
        if not _HEX_DIGITS.fullmatch(size_text):  # int(_, 16) takes "0x1f", "+1", "1_0"
            raise _ProtocolError(f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        if size > limit - len(body) or framing > limit:
            raise _BodyTooLarge(limit)
        if size == 0:
            while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                framing += len(line)  # trailers: ignored, but counted
                if framing > limit:
                    raise _BodyTooLarge(limit)
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def _read_until_close(reader: asyncio.StreamReader, limit: int) -> bytes:
    """A body delimited by the server closing the connection, at most ``limit`` bytes."""
    body = bytearray()
    while chunk := await reader.read(_CLOSE_READ):
        if len(chunk) > limit - len(body):
            raise _BodyTooLarge(limit)
        body += chunk
    return bytes(body)


def _content_length(value: str, limit: int) -> int:
    """The declared body length, refused before any byte is read when over ``limit``."""
    digits = value.strip().encode("latin-1")
    if not _DIGITS.fullmatch(digits):  # int() takes "+5", "5_0", "٥", and "5, 5" is two
        raise _ProtocolError(f"bad Content-Length {value[:20]!r}")
    if len(digits.lstrip(b"0")) > len(str(limit)) or int(digits) > limit:
        raise _BodyTooLarge(limit)
    return int(digits)


class _Undrained(Exception):
    """What follows a stopped stream did not end soon or short enough to keep the connection."""


_DRAIN_BYTES, _DRAIN_SECONDS = 1 << 16, 0.25
"""What is read, at most, after a sink stopped a stream (after ``[DONE]``, the body usually
ends at once): within these the connection stays reusable, past them it is closed."""


async def _stream_body(reader: asyncio.StreamReader, headers: dict[str, str], limit: int,
                       sink: BodySink) -> bool:
    """Hand a body to ``sink`` piece by piece, counted against ``limit`` like a kept body;
    return whether it was read to its end (False: the connection must be closed). Once the
    sink says :data:`END`, nothing more reaches it and the rest is read only as far as
    :data:`_DRAIN_BYTES` and :data:`_DRAIN_SECONDS` allow."""
    total = 0
    stopped: list[float] = []  # the loop's time, and the bytes read, when the sink stopped
    loop = asyncio.get_running_loop()

    def give(piece: bytes) -> None:
        nonlocal total
        total += len(piece)
        if total > limit:
            raise _BodyTooLarge(limit)
        if stopped:
            if total - stopped[1] > _DRAIN_BYTES:
                raise _Undrained
            return
        verdict = sink(piece) if piece else False
        if verdict == END:
            stopped.extend((loop.time(), total))
        elif verdict:
            raise _Undrained  # stopped for good: the connection goes

    async def read(work: Coroutine[Any, Any, bytes]) -> bytes:
        if not stopped:
            return await work
        left = stopped[0] + _DRAIN_SECONDS - loop.time()
        try:
            return await asyncio.wait_for(work, max(0.0, left))
        except asyncio.TimeoutError:
            raise _Undrained from None

    try:
        return await _framed(reader, headers, limit, give, read)
    except _Undrained:
        return False


_Read = Callable[[Coroutine[Any, Any, bytes]], Awaitable[bytes]]
"""Awaits one read of the socket (once a sink stopped, under the drain's deadline)."""


async def _framed(reader: asyncio.StreamReader, headers: dict[str, str], limit: int,
                  give: Callable[[bytes], None], read: _Read) -> bool:
    """Read a body by its framing (chunked, a length, or the close), each piece to ``give``."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        await _chunked(reader, limit, give, read)
    elif "content-length" in headers:
        await _exactly(reader, _content_length(headers["content-length"], limit), give, read)
    else:
        while piece := await read(reader.read(_CLOSE_READ)):
            give(piece)
    return True


async def _chunked(reader: asyncio.StreamReader, limit: int, give: Callable[[bytes], None],
                   read: _Read) -> None:
    """A chunked body's pieces to ``give``; its framing (sizes, trailers) counts to ``limit``."""
    framing = 0
    while True:
        line = await read(reader.readuntil(b"\r\n"))
        framing += len(line)
        size_text = line.split(b";", 1)[0].strip()
        if not _HEX_DIGITS.fullmatch(size_text):
            raise _ProtocolError(f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        if framing > limit:
            raise _BodyTooLarge(limit)
        if size == 0:
            while (line := await read(reader.readuntil(b"\r\n"))) != b"\r\n":
                framing += len(line)
                if framing > limit:
                    raise _BodyTooLarge(limit)
            return
        await _exactly(reader, size, give, read)
        await read(reader.readexactly(2))


async def _exactly(reader: asyncio.StreamReader, size: int, give: Callable[[bytes], None],
                   read: _Read) -> None:
    """The next ``size`` bytes to ``give``, in pieces as they come."""
    while size:
        piece = await read(reader.read(min(size, _CLOSE_READ)))
        if not piece:
            raise asyncio.IncompleteReadError(b"", size)
        size -= len(piece)
        give(piece)


async def _read_response(
    reader: asyncio.StreamReader, method: str, block: bytes, max_body: int,
    sink: BodySink | None = None,
) -> tuple[HttpResponse, bool]:
    """Read one answer whose first header block is ``block``; say if the connection stays.

    With ``sink``, a 2xx body goes to it as it arrives instead of into the answer.

    Raises:
        _BodyTooLarge: The body is, or is declared to be, longer than ``max_body``.
    """
    status, version, headers = _parse_head(block)
    while 100 <= status < 200 and status != 101:  # interim answer (100 Continue): skip it
        status, version, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
    conn_header = headers.get("connection", "").lower()
    keep = "close" not in conn_header
    if version == "HTTP/1.0":
        keep = "keep-alive" in conn_header
    if method == "HEAD" or status in (204, 304):
        body = b""
    elif sink is not None and 200 <= status < 300:
        body = b""
        whole = await _stream_body(reader, headers, max_body, sink)
        keep = keep and whole and ("content-length" in headers or "chunked" in
                                   headers.get("transfer-encoding", "").lower())
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader, max_body)
    elif "content-length" in headers:
        body = await reader.readexactly(_content_length(headers["content-length"], max_body))
    else:
        keep = False
        body = await _read_until_close(reader, max_body)
    return HttpResponse(status=status, headers=headers, body=body), keep


class HttpClient:
    """An async HTTP/1.1 client with a keep-alive pool per origin.

    Args:
        max_connections: The most connections open at once to one origin; further
            requests wait for a free one (the wait counts against their timeout).
        max_body_bytes: The longest response body read; a longer one (or a
            ``Content-Length`` over it) raises :class:`~miniagent.core.errors.ModelResponseError`
            and the connection is closed.

    Example:
        >>> async def ask() -> dict:
        ...     client = HttpClient()
        ...     try:
        ...         resp = await client.post_json("http://127.0.0.1:8000/v1/chat/completions",
        ...                                       {"model": "m", "messages": []})
        ...         return resp.json()
        ...     finally:
        ...         await client.aclose()
    """

    def __init__(
        self, *, max_connections: int = 1000, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        self.max_connections = max_connections
        self.max_body_bytes = max_body_bytes
        self._pools: dict[_Origin, _Pool] = {}

    async def post_json(
        self,
        url: str,
        payload: dict[str, Any] | bytes,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        sink: BodySink | None = None,
    ) -> HttpResponse:
        """POST a JSON body and read the whole answer.

        Args:
            url: An ``http://`` or ``https://`` URL.
            payload: A dict (encoded as UTF-8 JSON) or bytes already encoded.
            headers: Extra request headers.
            timeout: Seconds for the whole request: waiting for a connection, sending,
                and reading the answer (a streamed one to its end).
            sink: Receives the body of a 2xx answer piece by piece as it arrives (the
                answer's ``body`` is then empty); returning True stops the reading and
                closes the connection. Other answers are read whole, as without it.

        Returns:
            The answer, whatever its status.

        Raises:
            ModelConnectionError: The server could not be reached or broke the connection.
            ModelTimeout: No complete answer within ``timeout``.
            ModelResponseError: The body is longer than ``max_body_bytes``.
        """
        if isinstance(payload, dict):
            payload = json.dumps(payload, ensure_ascii=False).encode()
        return await self.request("POST", url, payload, headers, timeout, sink)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        sink: BodySink | None = None,
    ) -> HttpResponse:
        """Send one request and read the whole answer (see :meth:`post_json`)."""
        origin, target, host = _split_url(url)
        head = _head(method, target, host, headers or {}, len(body))
        try:
            if sys.version_info < (3, 11):
                return await asyncio.wait_for(
                    self._exchange(origin, method, head, body, sink), timeout)
            # What asyncio.timeout does, without its state machine and its two coroutines: a
            # timer on the caller's task (wait_for would start a task per request); the
            # caller's own cancellations pass through, counted by Task.cancelling.
            task = asyncio.current_task()
            assert task is not None, "a request runs inside a task"
            cancelling = task.cancelling()
            expiry = _Expiry(task)
            timer = asyncio.get_running_loop().call_later(timeout, expiry)
            try:
                return await self._exchange(origin, method, head, body, sink)
            except asyncio.CancelledError:
                if expiry.fired:
                    expiry.fired = False  # its cancellation is taken back here, once
                    if task.uncancel() <= cancelling:
                        raise asyncio.TimeoutError from None  # nobody else asked to cancel
                raise
            finally:
                timer.cancel()
                if expiry.fired:  # it fired, but the work ended otherwise: take it back
                    task.uncancel()
        except asyncio.TimeoutError:
            where = f"{origin[1]}:{origin[2]}"
            raise ModelTimeout(f"no answer from {where} within {timeout:g} s") from None

    async def _exchange(
        self, origin: _Origin, method: str, head: bytes, body: bytes, sink: BodySink | None
    ) -> HttpResponse:
        pool = self._pool(origin)
        async with pool.slots:
            conn = pool.take()
            if conn is not None:
                try:
                    return await self._roundtrip(pool, conn, method, head, body, sink,
                                                 reused=True)
                except _StaleConnection:
                    pass  # the server closed it while idle: once more on a fresh one
            try:
                conn = await _connect(origin)
            except OSError as exc:
                raise ModelConnectionError(_describe(exc, origin)) from exc
            return await self._roundtrip(pool, conn, method, head, body, sink, reused=False)

    async def _roundtrip(
        self, pool: _Pool, conn: _Conn, method: str, head: bytes, body: bytes,
        sink: BodySink | None, *, reused: bool,
    ) -> HttpResponse:
        reader, writer = conn
        keep = False
        try:
            block = await _send(conn, head, body, reused=reused)
            response, keep = await _read_response(reader, method, block, self.max_body_bytes,
                                                  sink)
        except (*_TRANSPORT_ERRORS, _ProtocolError) as exc:
            raise ModelConnectionError(_describe(exc, pool.origin)) from exc
        except _BodyTooLarge as exc:
            where = f"{pool.origin[1]}:{pool.origin[2]}"
            raise ModelResponseError(f"{where} sent too much: {exc}") from None
        finally:
            if keep and self._pools.get(pool.origin) is pool:  # not dropped by aclose()
                pool.idle.append(conn)
            else:
                writer.close()
        return response

    def _pool(self, origin: _Origin) -> _Pool:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(origin)
        if pool is None or pool.loop is not loop:
            # A client reused across event loops (sync wrappers call asyncio.run per run):
            # connections of a previous loop cannot be used from this one.
            if pool is not None:
                _drop_idle(pool)
            pool = _Pool(origin, loop, slots=_Slots(self.max_connections))
            self._pools[origin] = pool
        return pool

    async def aclose(self) -> None:
        """Close every idle connection; requests in flight close theirs when done.

        The client stays usable: a later request opens new connections.
        """
        writers = [w for pool in self._pools.values() for _, w in pool.idle]
        for pool in self._pools.values():
            _drop_idle(pool)
        self._pools.clear()
        for writer in writers:
            with contextlib.suppress(OSError, asyncio.TimeoutError, RuntimeError):
                await asyncio.wait_for(writer.wait_closed(), 1.0)


class _Expiry:
    """The timer of one request: cancels its task once, when it fires."""

    __slots__ = ("fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task, self.fired = task, False

    def __call__(self) -> None:
        self.fired = True
        self.task.cancel()


async def _send(conn: _Conn, head: bytes, body: bytes, *, reused: bool) -> bytes:
    """Send a request and return the first header block of the answer.

    On a reused connection, EOF or a reset before the first byte of the answer means the
    server had closed the connection while it sat idle: :class:`_StaleConnection`.
    """
    reader, writer = conn
    try:
        if len(body) < 65536:
            writer.write(head + body)  # one segment for the usual small JSON body
        else:
            writer.write(head)
            writer.write(body)
        await writer.drain()
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if reused and not exc.partial:
            raise _StaleConnection from exc
        raise
    except (ConnectionResetError, BrokenPipeError) as exc:
        if reused:
            raise _StaleConnection from exc
        raise


async def _connect(origin: _Origin) -> _Conn:
    scheme, host, port = origin
    if scheme == "https":
        import ssl  # imported here: only https needs it, and it costs import time

        ctx = ssl.create_default_context()
        return await asyncio.open_connection(
            host, port, ssl=ctx, server_hostname=host, limit=_READ_LIMIT
        )
    return await asyncio.open_connection(host, port, limit=_READ_LIMIT)


def _drop_idle(pool: _Pool) -> None:
    loop_closed = pool.loop.is_closed()
    while pool.idle:
        _, writer = pool.idle.pop()
        if loop_closed:
            # The transport cannot close itself without its loop; at least tell the
            # server now (the descriptor itself goes when the transport is collected).
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError, AttributeError):
                sock.shutdown(socket.SHUT_RDWR)
        else:
            writer.close()

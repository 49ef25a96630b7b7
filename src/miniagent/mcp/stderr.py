"""A stdio server's stderr, passed on and its end kept: :class:`StderrTail`.

The server writes into a pipe of ours instead of straight into our stderr (or its log file).
What arrives goes on to where it went before (nowhere for ``subprocess.DEVNULL``), and the
last :data:`KEPT_BYTES` are kept, so that a server that exits at start is reported with the
last lines it wrote (a missing module, a bad flag) instead of ``Connection closed``.

Passing on is done by a thread of the tail's own, never on the event loop: a destination that
does not keep up (our stderr piped into a paused pager) must not stop every session. Past
:data:`PENDING_MAX` bytes waiting to be written, what arrives is only kept here.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from typing import IO

__all__ = ["KEPT_BYTES", "StderrTail"]

KEPT_BYTES = 4096
"""Bytes of a server's stderr kept for messages (the end: where the error usually is)."""
PENDING_MAX = 1 << 20
"""Bytes of a server's stderr that may wait for a slow destination; more are not passed on."""
CLOSE_WAIT = 1.0
"""Seconds :meth:`StderrTail.close` gives the writes still waiting."""


class StderrTail(asyncio.Protocol):
    """The read end of the server's stderr pipe, on the running event loop.

    ``target`` is where the server's stderr goes: a text stream (default: ours at the time),
    a file descriptor, or ``subprocess.DEVNULL``.
    """

    def __init__(self, target: IO[str] | int | None) -> None:
        self._target = target
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._kept = bytearray()
        self._ended = asyncio.get_running_loop().create_future()
        self._transport: asyncio.BaseTransport | None = None
        self._write_fd: int | None = None
        self._closing = False
        self._exited: bool | None = None  # ``ended`` as it was when we began to stop it
        self._writer: ThreadPoolExecutor | None = None
        self._last_write: Future[None] | None = None
        self._pending = 0
        self._lock = threading.Lock()

    async def open(self) -> int:
        """The pipe's write end, for the server process (close it with :meth:`spawned`)."""
        read_fd, self._write_fd = os.pipe()
        reader = os.fdopen(read_fd, "rb", buffering=0)
        try:
            self._transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: self, reader)
        except BaseException:
            reader.close()
            self.spawned()
            raise
        return self._write_fd

    def spawned(self) -> None:
        """Close our copy of the write end: the pipe ends when the server's copy does."""
        fd, self._write_fd = self._write_fd, None
        if fd is not None:
            os.close(fd)

    @property
    def ended(self) -> bool:
        """Whether the server closed its stderr (it exited, most likely), before
        :meth:`stopping` if that was called (we stop it after: not an exit of its own)."""
        return self._exited if self._exited is not None else self._ended.done()

    def stopping(self) -> None:
        """The server is about to be stopped by us: an end after this is not its exit."""
        if self._exited is None:
            self._exited = self._ended.done()

    async def wait_end(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the pipe's end."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._ended), timeout)

    def last_lines(self, count: int = 3, width: int = 160) -> list[str]:
        """The last non-blank lines the server wrote, each cut to ``width`` characters."""
        lines = [" ".join(line.split()) for line in
                 bytes(self._kept).decode("utf-8", "replace").splitlines()]
        return [line[:width] for line in lines if line][-count:]

    def close(self) -> None:
        """Stop reading (what was kept stays); not an end of the server's stderr. Writes still
        waiting get :data:`CLOSE_WAIT` seconds."""
        self.spawned()
        self._closing = True
        if self._transport is not None:
            self._transport.close()
        if self._writer is not None:
            if self._last_write is not None:
                wait_for_futures([self._last_write], timeout=CLOSE_WAIT)
            self._writer.shutdown(wait=False)

    # -- asyncio.Protocol -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._kept += data
        del self._kept[:-KEPT_BYTES]
        self._pass_on(data)

    def eof_received(self) -> bool | None:
        self._end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closing:
            self._end()

    def _end(self) -> None:
        if not self._ended.done():
            self._ended.set_result(None)

    def _pass_on(self, data: bytes) -> None:
        if self._target == subprocess.DEVNULL:
            return
        with self._lock:
            if self._pending > PENDING_MAX:
                return  # the destination does not keep up: only the end is kept, here
            self._pending += len(data)
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="mcp-stderr")
        self._last_write = self._writer.submit(self._write, data)

    def _write(self, data: bytes) -> None:
        """On the writer thread: ``data`` to the destination, in the order it came."""
        target = self._target
        try:
            if isinstance(target, int):
                os.write(target, data)
                return
            stream = sys.stderr if target is None else target
            try:
                stream.write(self._decoder.decode(data))
            except TypeError:  # a binary file
                stream.write(data)  # type: ignore[arg-type]
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # a closed or broken destination: the server's output is only kept here
        finally:
            with self._lock:
                self._pending -= len(data)

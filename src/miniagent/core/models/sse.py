"""An incremental reader of server-sent events (the ``text/event-stream`` format).

Bytes go in as they arrive, in pieces of any size; complete events come out. Only what
chat completion streams use is kept: the ``data`` field (several ``data:`` lines of one event
are joined with newlines); ``event``, ``id`` and ``retry`` fields and ``:`` comments (keep-alive
pings) are skipped. Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``, split anywhere across pieces.

It is written here rather than taken from a library: the SSE client packages on PyPI are built
on httpx or requests, and the format needs a few dozen lines (WHATWG HTML, "9.2 Server-sent
events", the event stream interpretation).

Example:
    >>> reader = SSEReader()
    >>> reader.feed(b'data: {"a": 1}\\n\\nda')
    ['{"a": 1}']
    >>> reader.feed(b'ta: [DONE]\\r\\n\\r\\n')
    ['[DONE]']
"""

from __future__ import annotations

__all__ = ["MAX_EVENT_BYTES", "SSEError", "SSEReader"]

MAX_EVENT_BYTES = 8 << 20
"""The longest event (or line) accepted: a server that never ends a line is cut off."""


class SSEError(ValueError):
    """The stream is not an event stream that can be read (a line or an event is too long)."""


class SSEReader:
    """Turns pieces of an event stream into the ``data`` of each complete event."""

    def __init__(self, *, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._pending = bytearray()
        self._data: list[str] = []
        self._size = 0
        self._max = max_event_bytes
        self._skip_lf = False

    def feed(self, piece: bytes) -> list[str]:
        """Read ``piece``; return the data of the events it completed, in order.

        Raises:
            SSEError: A line or an event is longer than ``max_event_bytes``.
        """
        if self._skip_lf and piece[:1] == b"\n":
            piece = piece[1:]  # the "\n" of a "\r\n" split across two pieces
        self._skip_lf = False
        self._pending += piece
        events: list[str] = []
        start = 0
        buffer = self._pending
        while True:
            cr, lf = buffer.find(b"\r", start), buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            end = lf if cr == -1 or (lf != -1 and lf < cr) else cr
            line = bytes(buffer[start:end])
            if buffer[end:end + 1] == b"\r":
                if end + 1 == len(buffer):
                    self._skip_lf = True
                elif buffer[end + 1:end + 2] == b"\n":
                    end += 1
            start = end + 1
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buffer[:start]
        if len(buffer) > self._max:
            raise SSEError(f"an event stream line is over {self._max:,} bytes")
        return events

    def _line(self, line: bytes) -> str | None:
        if not line:  # a blank line ends the event
            if not self._data:
                return None
            data = "\n".join(self._data)
            self._data, self._size = [], 0
            return data
        if line.startswith(b":"):
            return None  # a comment: keep-alive
        name, _, value = line.partition(b":")
        if name != b"data":
            return None
        if value.startswith(b" "):
            value = value[1:]
        self._size += len(value)
        if self._size > self._max:
            raise SSEError(f"an event is over {self._max:,} bytes")
        self._data.append(value.decode("utf-8", "replace"))
        return None

    def close(self) -> list[str]:
        """The data of an event the stream ended in without its blank line (some servers
        close right after the last ``data:`` line)."""
        events = self.feed(b"\n\n") if self._pending or self._data else []
        return events

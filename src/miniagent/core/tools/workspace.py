"""File tools confined to a workspace root: ``list_files``, ``count_file_lines``, ``read_file``.

Paths outside the root (``..``, absolute paths elsewhere, symlinks leading out) are
refused with a message for the model. Every tool's cost is bounded whatever is on disk:

- files are read in fixed-size chunks, never whole: ``read_file`` returns at most
  ``max_bytes`` bytes (and ``max_lines`` lines) and says where and why it cut; skipping
  to ``start_line`` and ``count_file_lines`` scan at most the first
  :data:`MAX_SCAN_BYTES` of a file (a huge or endlessly growing file cannot keep a worker
  thread busy after the run's deadline);
- ``list_files`` reads at most :data:`MAX_SCANNED_ENTRIES` directory entries and keeps
  only the :data:`MAX_LISTED` first names in order, not the whole directory.

Output is always storable text. Contents that are not UTF-8 are decoded with
replacement characters. A file name's undecodable bytes (``caf\\xe9.txt`` written in
Latin-1) and control characters are shown escaped as ``\\xNN``; the tools accept that
escaped form back: a path that does not exist as written is tried with its ``\\xNN``
escapes read as raw bytes (a file literally named with a backslash wins).
"""

from __future__ import annotations

import codecs
import heapq
import io
import os
import re
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import BinaryIO, NamedTuple

from miniagent._internal import defaults
from miniagent._internal.wording import counted
from miniagent.core.errors import ToolDefinitionError, ToolError
from miniagent.core.tools.tool import Tool, tool

__all__ = [
    "DEFAULT_READ_BYTES",
    "MAX_LISTED",
    "MAX_READ_BYTES",
    "MAX_SCANNED_ENTRIES",
    "MAX_SCAN_BYTES",
    "workspace_tools",
]

MAX_LISTED = 500
"""Names ``list_files`` shows."""
MAX_SCANNED_ENTRIES = 100_000
"""Directory entries ``list_files`` reads before it stops."""
MAX_SCAN_BYTES = 1 << 30
"""Bytes of a file that ``count_file_lines`` counts and ``read_file`` skips through."""
DEFAULT_READ_BYTES = defaults.MAX_OBSERVATION_CHARS - 500
"""``read_file``'s default ``max_bytes``: the text and its notice fit one observation."""
MAX_READ_BYTES = 1 << 20
"""The largest ``max_bytes`` ``read_file`` takes."""

_MAX_READ_LINES = 2000
_CHUNK = 1 << 16
_SNIFF = 8192  # bytes checked for NUL to refuse binary files


def workspace_tools(root: str | Path) -> list[Tool]:
    """File tools confined to ``root``: ``list_files``, ``count_file_lines``, ``read_file``.

    Paths outside the root (``..``, absolute paths elsewhere, symlinks leading out) are
    refused with a message for the model.

    Args:
        root: the workspace directory.

    Raises:
        ToolDefinitionError: ``root`` is not a directory.
    """
    workspace = _Workspace(root)
    # All three only read: a call a crash interrupted may simply run again.

    @tool(idempotent=True)
    def list_files(path: str = ".") -> str:
        """List the files and directories in a workspace directory (directories end with '/').

        Args:
            path: directory relative to the workspace root.
        """
        return _list_files(workspace, path)

    @tool(idempotent=True)
    def count_file_lines(file_path: str) -> int:
        """Count the lines of a text file in the workspace.

        Args:
            file_path: file path relative to the workspace root.
        """
        return _count_lines(workspace.file(file_path), file_path)

    @tool(idempotent=True)
    def read_file(
        file_path: str, start_line: int = 1, max_lines: int = 200,
        max_bytes: int = DEFAULT_READ_BYTES,
    ) -> str:
        """Read lines of a text file in the workspace; says where it stopped if cut short.

        Args:
            file_path: file path relative to the workspace root.
            start_line: first line to read, counting from 1.
            max_lines: how many lines to read at most.
            max_bytes: how many bytes to read at most.
        """
        path = workspace.file(file_path)
        return _read_text(path, file_path, start_line, max_lines, max_bytes)

    return [list_files, count_file_lines, read_file]


# -- paths and names -------------------------------------------------------------------

_ESCAPED_BYTE = re.compile(rb"\\x(0[1-9a-fA-F]|[1-9a-fA-F][0-9a-fA-F])")  # no NUL in names
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _display_name(name: str) -> str:
    """``name`` as storable text: undecodable bytes and control characters as ``\\xNN``."""
    try:
        text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate not made from a byte (Windows names)
        text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _unescape(path: str) -> str | None:
    """``path`` with ``\\xNN`` escapes as raw bytes, or ``None`` if it has none."""
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
    unescaped = _ESCAPED_BYTE.sub(lambda m: bytes([int(m.group(1), 16)]), raw)
    return os.fsdecode(unescaped) if unescaped != raw else None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


class _Workspace:
    """Resolves model-given paths inside ``root`` and refuses everything else."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ToolDefinitionError(f"The workspace root {str(self.root)!r} is not a directory.")

    def resolve(self, path: str) -> Path:
        """The absolute path for ``path`` (or its ``\\xNN``-unescaped form, if only that
        exists); symlinks are followed before the check."""
        resolved = self._inside(path, path)
        unescaped = _unescape(path) if not _exists(resolved) else None
        if unescaped is not None:
            candidate = self._inside(unescaped, path)
            if _exists(candidate):
                return candidate
        return resolved

    def _inside(self, path: str, shown: str) -> Path:
        candidate = Path(path.strip() or ".")
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # NUL bytes, symlink loops
            raise ToolError(f"Invalid path {shown!r}: {exc}.") from exc
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(
                f"Access denied: {shown!r} is outside the workspace. "
                "Use a path relative to the workspace root, e.g. '.' or 'src/main.py'."
            )
        return resolved

    def relative(self, path: Path) -> str:
        return _display_name(path.relative_to(self.root).as_posix()) if path != self.root else "."

    def file(self, path: str) -> Path:
        resolved = self.resolve(path)
        if not resolved.exists():
            raise ToolError(f"No such file: {path!r}. Use list_files to see what exists.")
        if not resolved.is_file():
            raise ToolError(f"{path!r} is not a file. Use list_files to look inside a directory.")
        return resolved


# -- list_files ------------------------------------------------------------------------


def _list_files(workspace: _Workspace, path: str) -> str:
    directory = workspace.resolve(path)
    if not directory.exists():
        raise ToolError(f"No such directory: {path!r}. Use list_files('.') to start at the root.")
    if not directory.is_dir():
        raise ToolError(f"{path!r} is a file, not a directory. Use read_file to read it.")
    try:
        with os.scandir(directory) as scan:
            seen = 0

            def counted() -> Iterator[os.DirEntry[str]]:
                nonlocal seen
                for entry in islice(scan, MAX_SCANNED_ENTRIES):
                    seen += 1
                    yield entry

            first = heapq.nsmallest(MAX_LISTED, counted(), key=lambda e: e.name)
            stopped = next(scan, None) is not None
            lines = [_display_name(e.name) + ("/" if _is_dir(e) else "") for e in first]
    except OSError as exc:
        raise ToolError(f"Cannot list {path!r}: {exc.strerror or exc}.") from exc
    if not lines:
        return f"(empty directory: {workspace.relative(directory)})"
    if stopped:
        lines.append(
            f"... (the directory has more than {MAX_SCANNED_ENTRIES:,} entries; listing read "
            f"that many and shows the first {len(first)} of them by name)"
        )
    elif seen > MAX_LISTED:
        lines.append(f"... ({seen - MAX_LISTED} more entries)")
    return "\n".join(lines)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


# -- reading ---------------------------------------------------------------------------


class _Scan(NamedTuple):
    newlines: int
    """Newlines passed."""
    open_line: bool
    """The data ended in a line without a newline."""
    exhausted: bool
    """:data:`MAX_SCAN_BYTES` ran out before the end of the file (or the wanted line)."""


def _scan(handle: BinaryIO, stop_after: int | None = None) -> _Scan:
    """Count newlines from the handle's position in fixed-size chunks, within the budget.

    With ``stop_after``, stop just past that many newlines and leave the handle there.
    """
    newlines, scanned, open_line = 0, 0, False
    while chunk := handle.read(_CHUNK):
        scanned += len(chunk)
        found = chunk.count(b"\n")
        if stop_after is not None and newlines + found >= stop_after:
            handle.seek(_after_newline(chunk, stop_after - newlines) - len(chunk), io.SEEK_CUR)
            return _Scan(stop_after, False, False)
        newlines += found
        open_line = not chunk.endswith(b"\n")
        if scanned >= MAX_SCAN_BYTES and handle.read(1):
            return _Scan(newlines, open_line, True)
    return _Scan(newlines, open_line, False)


def _after_newline(chunk: bytes, nth: int) -> int:
    """The index just past the ``nth`` newline in ``chunk`` (``nth`` >= 1 and present)."""
    index = -1
    for _ in range(nth):
        index = chunk.index(b"\n", index + 1)
    return index + 1


def _count_lines(path: Path, shown: str) -> int:
    with path.open("rb") as handle:
        scan = _scan(handle)
    if scan.exhausted:
        raise ToolError(
            f"{shown!r} is larger than the {_size(MAX_SCAN_BYTES)} count_file_lines reads "
            f"({_size(path.stat().st_size)}); its first {_size(MAX_SCAN_BYTES)} hold "
            f"{counted(scan.newlines, 'line')}."
        )
    return scan.newlines + (1 if scan.open_line else 0)


def _read_text(path: Path, shown: str, start_line: int, max_lines: int, max_bytes: int) -> str:
    if start_line < 1:
        raise ToolError("start_line counts from 1; use start_line=1 for the beginning.")
    if not 1 <= max_lines <= _MAX_READ_LINES:
        raise ToolError(f"max_lines must be between 1 and {_MAX_READ_LINES}.")
    if not 1 <= max_bytes <= MAX_READ_BYTES:
        raise ToolError(f"max_bytes must be between 1 and {MAX_READ_BYTES}.")
    with path.open("rb") as handle:
        if b"\0" in handle.read(_SNIFF):
            raise ToolError(f"{shown!r} looks like a binary file; only text files can be read.")
        handle.seek(0)
        if start_line > 1:
            _skip_to(handle, shown, start_line)
        data = handle.read(max_bytes + 1)  # one byte more tells whether anything follows
    if not data:
        if start_line == 1:
            return "(empty file)"
        raise ToolError(
            f"{shown!r} has {counted(start_line - 1, 'line')}; start_line {start_line} is past "
            "the end."
        )
    return _cut(data, start_line, max_lines, max_bytes, path)


def _skip_to(handle: BinaryIO, shown: str, start_line: int) -> None:
    scan = _scan(handle, stop_after=start_line - 1)
    if scan.exhausted:
        raise ToolError(
            f"start_line {start_line} is beyond the first {_size(MAX_SCAN_BYTES)} of {shown!r} "
            f"({counted(scan.newlines, 'line')}), which is as far as read_file looks."
        )
    if scan.newlines < start_line - 1:
        total = scan.newlines + (1 if scan.open_line else 0)
        raise ToolError(f"{shown!r} has {counted(total, 'line')}; start_line {start_line} is "
                        "past the end.")


def _cut(data: bytes, start_line: int, max_lines: int, max_bytes: int, path: Path) -> str:
    """At most ``max_lines`` whole lines within ``max_bytes``, with a notice when cut."""
    window = data[:max_bytes]
    lines, end = 0, 0
    while lines < max_lines and (newline := window.find(b"\n", end)) >= 0:
        lines, end = lines + 1, newline + 1
    if lines < max_lines and len(data) <= max_bytes:  # the rest of the file fits
        return _decode(window, final=True)
    if not lines:  # one line longer than max_bytes
        return _decode(window, final=False) + (
            f"\n... (line {start_line} is longer than max_bytes={max_bytes}: showing its first "
            f"{max_bytes:,} bytes; call read_file with start_line={start_line + 1} for the "
            "lines after it)"
        )
    text = _decode(window[:end], final=True)
    if end == len(data):  # exactly max_lines lines, and nothing after them
        return text
    last = start_line + lines - 1
    why = "" if lines == max_lines else f": max_bytes={max_bytes} reached"
    return text + (
        f"\n... (showing lines {start_line}-{last}, {counted(end, 'byte')}{why}, of a "
        f"{_size(path.stat().st_size)} file; call read_file with start_line={last + 1} "
        "for more)"
    )


def _decode(data: bytes, *, final: bool) -> str:
    """UTF-8 with replacement; ``final=False`` drops a character cut at the end."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=final)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return counted(count, 'byte')

"""Safe built-in tools, opt-in: a calculator, workspace-confined file tools, the time.

Nothing here evaluates code or touches a file outside the workspace root given to
:func:`workspace_tools`. Bad input raises :class:`~miniagent.errors.ToolError`, so the
model sees a plain explanation of what to do instead.

Example:
    >>> from miniagent.tools.registry import ToolRegistry
    >>> registry = ToolRegistry(builtin_tools(root="."))
    >>> calculator("2 * (3 + 4)")
    14
"""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone
from itertools import islice
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from miniagent.errors import ToolDefinitionError, ToolError
from miniagent.tools.calculator import calculator
from miniagent.tools.registry import Tool, tool

__all__ = ["builtin_tools", "calculator", "current_time", "workspace_tools"]

# -- workspace files -----------------------------------------------------------------

_MAX_LISTED = 500
_MAX_READ_LINES = 2000


class _Workspace:
    """Resolves model-given paths inside ``root`` and refuses everything else."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ToolDefinitionError(f"The workspace root {str(self.root)!r} is not a directory.")

    def resolve(self, path: str) -> Path:
        """The absolute path for ``path``; symlinks are followed before the check."""
        candidate = Path(path.strip() or ".")
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # NUL bytes, symlink loops
            raise ToolError(f"Invalid path {path!r}: {exc}.") from exc
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(
                f"Access denied: {path!r} is outside the workspace. "
                "Use a path relative to the workspace root, e.g. '.' or 'src/main.py'."
            )
        return resolved

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def file(self, path: str) -> Path:
        resolved = self.resolve(path)
        if not resolved.exists():
            raise ToolError(f"No such file: {path!r}. Use list_files to see what exists.")
        if not resolved.is_file():
            raise ToolError(f"{path!r} is not a file. Use list_files to look inside a directory.")
        return resolved


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

    @tool
    def list_files(path: str = ".") -> str:
        """List the files and directories in a workspace directory (directories end with '/').

        Args:
            path: directory relative to the workspace root.
        """
        return _list_files(workspace, path)

    @tool
    def count_file_lines(file_path: str) -> int:
        """Count the lines of a text file in the workspace.

        Args:
            file_path: file path relative to the workspace root.
        """
        return _count_lines(workspace.file(file_path))

    @tool
    def read_file(file_path: str, start_line: int = 1, max_lines: int = 200) -> str:
        """Read lines of a text file in the workspace.

        Args:
            file_path: file path relative to the workspace root.
            start_line: first line to read, counting from 1.
            max_lines: how many lines to read at most.
        """
        return _read_lines(workspace.file(file_path), file_path, start_line, max_lines)

    return [list_files, count_file_lines, read_file]


def _list_files(workspace: _Workspace, path: str) -> str:
    directory = workspace.resolve(path)
    if not directory.exists():
        raise ToolError(f"No such directory: {path!r}. Use list_files('.') to start at the root.")
    if not directory.is_dir():
        raise ToolError(f"{path!r} is a file, not a directory. Use read_file to read it.")
    entries = sorted(directory.iterdir(), key=lambda p: p.name)
    if not entries:
        return f"(empty directory: {workspace.relative(directory)})"
    lines = [entry.name + ("/" if entry.is_dir() else "") for entry in entries[:_MAX_LISTED]]
    if len(entries) > _MAX_LISTED:
        lines.append(f"... ({len(entries) - _MAX_LISTED} more entries)")
    return "\n".join(lines)


def _count_lines(path: Path) -> int:
    count = 0
    last = b""
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 16):
            count += chunk.count(b"\n")
            last = chunk
    return count + (1 if last and not last.endswith(b"\n") else 0)


def _read_lines(path: Path, shown: str, start_line: int, max_lines: int) -> str:
    if start_line < 1:
        raise ToolError("start_line counts from 1; use start_line=1 for the beginning.")
    if not 1 <= max_lines <= _MAX_READ_LINES:
        raise ToolError(f"max_lines must be between 1 and {_MAX_READ_LINES}.")
    with path.open("rb") as handle:
        if b"\0" in handle.read(8192):
            raise ToolError(f"{shown!r} looks like a binary file; only text files can be read.")
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        lines = list(islice(handle, start_line - 1, start_line - 1 + max_lines + 1))
    if not lines:
        if start_line == 1:
            return "(empty file)"
        total = _count_lines(path)
        raise ToolError(f"{shown!r} has {total} lines; start_line {start_line} is past the end.")
    more = len(lines) > max_lines
    text = "".join(lines[:max_lines])
    if more:
        end = start_line + max_lines - 1
        text += (
            f"\n... (showing lines {start_line}-{end}; "
            f"call read_file with start_line={end + 1} for more)"
        )
    return text


# -- time ----------------------------------------------------------------------------


@tool
def current_time(timezone: str = "UTC") -> str:
    """The current date and time in ISO 8601, e.g. 2024-05-01T14:03:00+02:00.

    Args:
        timezone: an IANA time zone name such as 'UTC', 'Europe/Paris' or 'Asia/Tokyo'.
    """
    name = timezone.strip() or "UTC"
    if name.upper() in ("UTC", "Z", "GMT"):
        return datetime.now(dt_timezone.utc).isoformat(timespec="seconds")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ToolError(
            f"Unknown time zone {timezone!r}. Use an IANA name such as 'UTC', "
            "'Europe/Paris' or 'America/New_York'."
        ) from exc
    return datetime.now(zone).isoformat(timespec="seconds")


def builtin_tools(root: str | Path = ".") -> list[Tool]:
    """All built-in tools: calculator, the workspace file tools for ``root``, current_time.

    Args:
        root: the workspace directory for the file tools.
    """
    return [calculator, *workspace_tools(root), current_time]

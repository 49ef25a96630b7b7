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

import ast
import math
import operator
import warnings
from collections.abc import Callable
from datetime import datetime
from datetime import timezone as dt_timezone
from itertools import islice
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from miniagent.errors import ToolDefinitionError, ToolError
from miniagent.tools.registry import Tool, tool

__all__ = ["builtin_tools", "calculator", "current_time", "workspace_tools"]

# -- calculator ----------------------------------------------------------------------

_MAX_EXPRESSION_CHARS = 1000
_MAX_INT_BITS = 4096  # about 1,200 decimal digits

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
_ALLOWED = (
    "numbers, + - * / // % **, parentheses, "
    f"{', '.join(_FUNCTIONS)} and the constants {', '.join(_CONSTANTS)}"
)


@tool
def calculator(expression: str) -> int | float:
    """Evaluate an arithmetic expression, such as ``(2 + 3) * sqrt(16) / 2``.

    Supports numbers, + - * / // % **, parentheses, the functions sqrt, sin, cos, tan,
    log, log10, exp, abs, round, floor, ceil and the constants pi and e.

    Args:
        expression: the arithmetic expression to evaluate.
    """
    text = expression.strip()
    if not text:
        raise ToolError("The expression is empty. Example: calculator('2 * (3 + 4)').")
    if len(text) > _MAX_EXPRESSION_CHARS:
        raise ToolError(f"The expression is too long (max {_MAX_EXPRESSION_CHARS} characters).")
    try:
        with warnings.catch_warnings():  # "1_000x" warns before failing; the model gets the error
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ToolError(f"Cannot parse {text!r} as arithmetic. Allowed: {_ALLOWED}.") from exc
    try:
        return _evaluate(tree.body)
    except ZeroDivisionError as exc:
        raise ToolError(f"Division by zero in {text!r}.") from exc
    except OverflowError as exc:
        raise ToolError(f"The result of {text!r} is too large.") from exc
    except RecursionError as exc:
        raise ToolError(f"The expression {text!r} is nested too deeply.") from exc
    except (ValueError, TypeError) as exc:
        raise ToolError(f"Cannot evaluate {text!r}: {exc}.") from exc


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolError(f"Only numbers are allowed, not {node.value!r}. Allowed: {_ALLOWED}.")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolError(f"Unknown name {node.id!r}. Allowed: {_ALLOWED}.")
    if isinstance(node, ast.Call):
        return _call(node)
    raise ToolError(
        f"{_describe_node(node)} is not allowed in the calculator. Allowed: {_ALLOWED}."
    )


def _call(node: ast.Call) -> Any:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        what = node.func.id if isinstance(node.func, ast.Name) else _describe_node(node.func)
        raise ToolError(f"Unknown function {what!r}. Allowed functions: {', '.join(_FUNCTIONS)}.")
    if node.keywords:
        raise ToolError(f"{node.func.id}() takes positional arguments only.")
    args = [_evaluate(arg) for arg in node.args]
    if node.func.id == "round" and len(args) == 2 and not isinstance(args[1], int):
        raise ToolError("round(x, n) needs a whole number of digits n.")
    return _checked(_FUNCTIONS[node.func.id](*args))


def _check_power(base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)) or abs(base) <= 1:
        return
    bits = (abs(base).bit_length() - 1) * exponent
    if bits > _MAX_INT_BITS:
        raise ToolError(f"The power is too large to compute (about {bits} bits).")


def _checked(value: Any) -> Any:
    if isinstance(value, complex):
        raise ToolError("The result is not a real number (e.g. a fractional power of a negative).")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise ToolError(f"The result is too large (more than {_MAX_INT_BITS} bits).")
    return value


def _describe_node(node: ast.AST) -> str:
    names = {
        ast.Attribute: "Attribute access",
        ast.Subscript: "Indexing",
        ast.Lambda: "A lambda",
        ast.Compare: "A comparison",
        ast.BoolOp: "A boolean operator",
    }
    return names.get(type(node), f"The syntax {type(node).__name__!r}")


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

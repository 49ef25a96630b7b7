"""Text from models, tools, servers and session files, made safe to print on a terminal.

Whatever the CLI prints that it did not write itself goes through :func:`visible` (plain
output) or :func:`markup` (inside rich markup), and JSON through :func:`json_text`. A model,
a tool's output or an edited session file can then no longer write the clipboard (OSC 52),
clear the screen, set the window title, move the cursor, or reorder what is shown with bidi
overrides: each such character is printed as an escape (``\\x1b``, ``\\u202e``), so the
person sees that it was there. Newlines and tabs stay as they are. Rich's markup escaping
is a separate matter (``[bold]`` in a model's text) and is applied on top by :func:`markup`.
"""

from __future__ import annotations

import codecs
import io
import json
import re
import sys
from typing import Any, TextIO

from rich.markup import escape

__all__ = ["TERMINAL_CHARS", "clip", "json_text", "markup", "tolerant_streams",
           "unicode_stream", "visible"]

TERMINAL_CHARS = 20_000
"""The most characters of one text (an answer, an observation) drawn on the terminal."""

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 controls but tab and newline; DEL; C1 controls
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\ud800-\udfff]"  # lone surrogates: not printable, and not encodable either
)
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What ``json.dumps(..., ensure_ascii=False)`` leaves raw: it escapes only C0 controls."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every character that could control a terminal written as an escape.

    Example:
        >>> visible("title\\x1b]0;pwned\\x07 and\\ttab")
        'title\\\\x1b]0;pwned\\\\x07 and\\ttab'
    """
    return _UNSAFE.sub(_escape, text)


def clip(text: str, limit: int = TERMINAL_CHARS) -> str:
    """``text``, or its first ``limit`` characters and how many more ``--json`` has."""
    if len(text) <= limit:
        return text
    return (f"{text[:limit]}… ({len(text) - limit:,} more characters not shown; "
            "--json prints the whole text)")


def markup(text: str, limit: int = TERMINAL_CHARS) -> str:
    """``text`` clipped, made :func:`visible`, and escaped for rich markup."""
    return escape(visible(clip(text, limit)))


def json_text(value: Any, *, indent: int | None = None, ascii_only: bool = False) -> str:
    """``value`` as JSON (non-ASCII kept readable), with nothing in it that drives a terminal.

    The characters :func:`visible` escapes become ``\\uXXXX`` escapes, so the JSON decodes to
    exactly ``value``; with ``ascii_only`` (for a terminal that cannot encode Unicode) all
    non-ASCII characters do.
    """
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def unicode_stream(stream: TextIO) -> bool:
    """Whether ``stream`` encodes every character (UTF-8, UTF-16, ...)."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


def tolerant_streams() -> None:
    """Make stdout and stderr print what their encoding lacks as escapes, never raise.

    On a terminal set to Latin-1 or ASCII, a model's ``北京`` then prints as ``\\u5317\\u4eac``
    instead of ending the command with a ``UnicodeEncodeError``.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not unicode_stream(stream):
            stream.reconfigure(errors="backslashreplace")

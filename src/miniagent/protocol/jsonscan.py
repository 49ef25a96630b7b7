"""String-aware JSON extraction and repair, shared by both protocols.

Models wrap tool arguments in Markdown fences, follow them with prose that holds
more braces, write Python dicts with single quotes, or stop half-way through.
A regex cannot find where such an object ends (nested braces and braces inside
strings defeat it), so :func:`scan_end` walks the text once, matching brackets
while it tracks quoted strings and escapes.

:func:`decode_arguments` is the single place where raw argument text becomes a
``dict``: strict :func:`json.loads` first, ``json_repair`` only when that fails.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["decode_arguments", "scan_end", "strip_fences"]

_OPENERS = {"{": "}", "[": "]"}
_QUOTES = "\"'"


def strip_fences(text: str) -> str:
    """Remove Markdown code fences or inline backticks around ``text``.

    Handles ```` ```json ... ``` ````, ```` ``` ... ``` ```` (the closing fence may be
    missing, as in truncated output) and ```` `...` ````.

    Args:
        text: The raw text.

    Returns:
        The text inside the fences, stripped of outer whitespace.
    """
    s = text.strip()
    if s.startswith("```"):
        newline = s.find("\n")
        # A fence line holds at most a language tag; anything else means "```{...}```".
        if newline != -1 and " " not in s[3:newline].strip() and "{" not in s[3:newline]:
            s = s[newline + 1 :]
        else:
            s = s[3:]
            if s[:4].lower() == "json" and not s[4:5].isalnum():
                s = s[4:]
        if s.rstrip().endswith("```"):
            s = s.rstrip()[:-3]
        return s.strip()
    if len(s) >= 2 and s[0] == "`" and s[-1] == "`":
        return s.strip("`").strip()
    return s


def scan_end(text: str, start: int) -> int | None:
    """Find where the JSON-like value starting at ``text[start]`` ends.

    ``text[start]`` must be ``{``, ``[`` or a quote. Brackets are matched while
    quoted strings (double or single quotes, for Python-style dicts) and backslash
    escapes are skipped, so braces or labels inside strings do not count. The scan
    is one linear pass.

    Args:
        text: The text to scan.
        start: Index of the opening bracket or quote.

    Returns:
        The index just past the matching closer, or ``None`` if the value is not
        closed (truncated output) or ``text[start]`` opens nothing.
    """
    if start >= len(text):
        return None
    first = text[start]
    if first in _QUOTES:
        return _string_end(text, start)
    if first not in _OPENERS:
        return None
    depth = 0
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in _QUOTES:
            end = _string_end(text, i)
            if end is None:
                return None
            i = end
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _string_end(text: str, start: int) -> int | None:
    """Index just past the string opened by the quote at ``text[start]``."""
    quote = text[start]
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            return i + 1
        i += 1
    return None


def decode_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Decode tool-call argument text into a dict, as leniently as is safe.

    Steps, in order:

    1. Strip Markdown fences / backticks; empty or blank text -> ``({}, None)``.
    2. Strict :func:`json.loads`. A dict -> ``(dict, None)``. A JSON string whose
       content is itself a JSON object (double-encoded arguments) -> that dict.
       Any other value (``"Paris"``, ``42``, ``[1, 2]``) -> ``(None, None)``.
    3. Text that fails strict decoding and does not start with ``{`` is a bare
       value such as ``Paris`` -> ``(None, None)``.
    4. Otherwise (an object with single quotes, trailing commas, Python literals,
       or truncated) -> ``json_repair``. A dict -> ``(dict, None)``; anything
       else -> ``(None, "invalid JSON: <reason>")``, and so is an empty dict
       repaired out of text that held more than braces (content lost, not fixed).

    ``(None, None)`` means "a bare value": the caller keeps the raw text and the
    tool registry maps it to a tool's single parameter, or reports the problem.

    Args:
        raw: The argument text as the model wrote it.

    Returns:
        ``(arguments, error)``: at most one of them is not ``None``.

    Example:
        >>> decode_arguments('```json\\n{"x": 1}\\n```')
        ({'x': 1}, None)
        >>> decode_arguments("{'x': 1,}")
        ({'x': 1}, None)
        >>> decode_arguments("Paris")
        (None, None)
    """
    text = strip_fences(raw)
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = _short_reason(exc)
    else:
        if isinstance(value, dict):
            return value, None
        if isinstance(value, str):
            inner = _loads_dict(value)
            if inner is not None:
                return inner, None
        return None, None
    if not text.startswith("{"):
        return None, None
    repaired = _repair(text)
    # An empty dict repaired out of non-empty text means the content was lost, not fixed.
    if isinstance(repaired, dict) and (repaired or not text.strip("{} \t\r\n")):
        return repaired, None
    return None, f"invalid JSON: {reason}"


def _loads_dict(text: str) -> dict[str, Any] | None:
    """Strictly decode ``text`` if it is a JSON object, else ``None``."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _repair(text: str) -> Any:
    """Run ``json_repair``; any failure inside it yields ``None``."""
    import json_repair  # imported on first use: most outputs are valid JSON (saves ~14 ms)

    try:
        return json_repair.repair_json(text, return_objects=True)
    except Exception:  # the repair library must not crash the loop
        return None


def _short_reason(exc: BaseException) -> str:
    """A one-line reason for a decoding failure."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

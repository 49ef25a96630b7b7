"""String-aware JSON extraction, bounded decoding and repair of what models and servers send
(read by the protocols, the model transports, the step logic, the tools and the CLI).

Models wrap tool arguments in Markdown fences, follow them with prose that holds
more braces, write Python dicts with single quotes, or stop half-way through.
A regex cannot find where such an object ends (nested braces and braces inside
strings defeat it), so :func:`scan_end` walks the text once, matching brackets
while it tracks quoted strings and escapes.

:func:`decode_arguments` is the single place where raw argument text becomes a
``dict``: strict :func:`json.loads` first and, when that fails,
:mod:`~miniagent._internal.lenient`,
which accepts only repairs that keep the meaning (quotes, trailing commas, Python literals).
Nothing is invented: text that :func:`incomplete` finds cut off (an object, array or string
never closed) would need its end made up ("amount": 15 of 1500), and a missing value, key or
bracket inside would need a guess (``{"body": }`` is not ``{"body": ""}``); both are errors.

Everything decoded from a model or a server goes through :func:`loads_limited`, which
fails only with :class:`ValueError`: the C decoder's :class:`RecursionError` (about 1,000
levels), the integer digit limit (``9`` x 5,000) and values nested past a given depth all
become :class:`JSONLimitError`, so no recursive code further on meets them.
:func:`write_json` is the one writer of what goes out (request bodies) and of what the step
logic checks before it keeps a value.
:func:`excerpt` shows any value in a few hundred characters without recursing or
encoding the whole of it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from miniagent._internal.lenient import RefusedRepair, loads_lenient

__all__ = [
    "MAX_DEPTH",
    "JSONLimitError",
    "decode_arguments",
    "deeper_than",
    "excerpt",
    "incomplete",
    "json_object",
    "loads_limited",
    "scan_end",
    "strip_fences",
    "write_json",
]

MAX_DEPTH = 64
"""The deepest nesting of tool arguments decoded (tool schemas rarely go past 5)."""

_REPAIR_MAX_CHARS = 100_000
"""Longer broken arguments are not repaired: a model rarely writes that much in one call, and
the lenient reader, linear as it is, runs in Python (strict decoding runs in C)."""

INCOMPLETE = "incomplete JSON: the text ends before the object is closed (cut off)"
"""The error of arguments that were cut off; they are never repaired into a call."""

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


def incomplete(raw: str) -> bool:
    """Whether ``raw`` (fences stripped) opens a JSON object, array or string it never closes:
    the text of a value that was cut off, by ``max_tokens`` or by a stream that stopped.

    Example:
        >>> incomplete('{"to": "Alice", "amount": 15'), incomplete('{"amount": 1500}')
        (True, False)
    """
    text = strip_fences(raw)
    if text[:1] not in ("{", "[", '"', "'"):
        return False
    try:  # strict JSON is closed (the scan below would find its end): one C pass instead
        json.loads(text)
    except (ValueError, RecursionError):
        return scan_end(text, 0) is None
    return False


class JSONLimitError(ValueError):
    """JSON that is well-formed, or may be, but past a limit: too deep, or a number with
    too many digits. Repairing it cannot help."""


def loads_limited(data: str | bytes, *, max_depth: int) -> Any:
    """:func:`json.loads`, failing only with :class:`ValueError`, and no deeper than ``max_depth``.

    Args:
        data: JSON text, or bytes in UTF-8 (or UTF-16/32, as :func:`json.loads` detects).
        max_depth: The deepest nesting of arrays and objects accepted (a scalar is 0 deep).

    Returns:
        The decoded value.

    Raises:
        JSONLimitError: The value nests deeper than ``max_depth`` (or deeper than the
            decoder can go), or holds an integer past Python's digit limit.
        ValueError: Any other reason the text is not JSON (a one-line message).

    Example:
        >>> loads_limited("[[1]]", max_depth=2)
        [[1]]
        >>> loads_limited("[[1]]", max_depth=1)
        Traceback (most recent call last):
        ...
        miniagent._internal.jsonscan.JSONLimitError: nested deeper than 1 levels
    """
    try:
        value = json.loads(data)
    except RecursionError:
        raise JSONLimitError(f"nested deeper than {max_depth} levels") from None
    except MemoryError:
        raise JSONLimitError("too large to decode") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the digit limit
        if "integer string conversion" in str(exc):
            raise JSONLimitError(
                f"a number with more than {sys.get_int_max_str_digits()} digits"
            ) from None
        raise ValueError(_short_reason(exc)) from None
    # Nesting needs brackets: text with few of them cannot be too deep (saves the walk).
    opens = data.count(b"[") + data.count(b"{") if isinstance(data, bytes) else (
        data.count("[") + data.count("{"))
    if opens > max_depth and deeper_than(value, max_depth):
        raise JSONLimitError(f"nested deeper than {max_depth} levels")
    return value


def json_object(text: str) -> dict[str, Any]:
    """``text`` as a JSON object: what a person gives as JSON on a command line or in a form.

    Raises:
        ValueError: ``text`` is not JSON (json's message says where).
        TypeError: it is JSON of another type; the message is the type's name (``list``).

    Example:
        >>> json_object('{"to": "Alice"}')
        {'to': 'Alice'}
    """
    value = json.loads(text)
    if not isinstance(value, dict):
        raise TypeError(type(value).__name__)
    return value


def deeper_than(value: Any, limit: int) -> bool:
    """Whether lists, tuples and dicts in ``value`` nest deeper than ``limit``.

    Iterative, so any depth is safe to check; it stops at the first path past ``limit``
    (a value that contains itself is deeper than any limit).
    """
    if not isinstance(value, _NESTING):
        return False
    if limit >= 1:  # the common case, flat arguments: one pass, no stack
        for child in value.values() if isinstance(value, dict) else value:
            if isinstance(child, _NESTING):
                break
        else:
            return False
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, _NESTING))
    return False


_NESTING = (dict, list, tuple)


def excerpt(value: Any, limit: int = 200) -> str:
    """``value`` written as JSON, cut after about ``limit`` characters.

    Iterative and lazy: a body nested 100,000 deep, one holding itself, or one of 32 MiB
    costs only the characters shown. Lone surrogates are shown as ``\\udXXX`` escapes, so
    the excerpt can go into any message that is printed or stored.
    """
    parts: list[str] = []
    size = 0
    for piece in _pieces(value, limit):
        parts.append(piece)
        size += len(piece)
        if size > limit:
            text = "".join(parts)[:limit] + "..."
            break
    else:
        text = "".join(parts)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _Token(str):
    """Punctuation queued among the values still to be written (told apart by type)."""


def _pieces(value: Any, limit: int) -> Iterator[str]:
    """The JSON text of ``value``, a piece at a time, with an explicit stack of iterators."""
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, _Token):
            yield item
        elif isinstance(item, dict):
            stack.append(_members(item))
        elif isinstance(item, list | tuple):
            stack.append(_elements(item))
        else:
            yield _scalar(item, limit)


_END = object()


def _members(obj: dict[Any, Any]) -> Iterator[Any]:
    yield _Token("{")
    for i, (key, item) in enumerate(obj.items()):
        yield _Token(", " if i else "")
        name = _scalar(key, 200)
        yield _Token((name if isinstance(key, str) else json.dumps(name)) + ": ")
        yield item
    yield _Token("}")


def _elements(items: list[Any] | tuple[Any, ...]) -> Iterator[Any]:
    yield _Token("[")
    for i, item in enumerate(items):
        yield _Token(", " if i else "")
        yield item
    yield _Token("]")


def _scalar(value: Any, limit: int) -> str:
    if isinstance(value, str):
        return json.dumps(value[: limit + 1], ensure_ascii=False)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # past the digit limit
            return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return repr(value)
    return f"<{type(value).__name__}>"


def decode_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Decode tool-call argument text into a dict, as leniently as is safe.

    Steps, in order:

    1. Strip Markdown fences / backticks; empty or blank text -> ``({}, None)``.
    2. Strict decoding (:func:`loads_limited`). A dict -> ``(dict, None)``. A JSON string
       whose content is itself a JSON object (double-encoded arguments) -> that dict.
       Any other value (``"Paris"``, ``42``, ``[1, 2]``) -> ``(None, None)``.
    3. Text past a limit (nested deeper than :data:`MAX_DEPTH`, a number of thousands of
       digits) -> ``(None, "invalid JSON: <what>")``: repairing cannot fix that.
    4. Text that fails strict decoding and does not start with ``{`` is a bare
       value such as ``Paris`` -> ``(None, None)``; so is text in braces with no colon and no
       quote (``{temperature in SF}``): it is no attempt at an object.
    5. Two JSON values glued together (``{"a": 1}{"b": 2}``, or on two lines) ->
       ``(None, "invalid JSON: ...")``: neither is silently chosen.
    6. An object never closed (:func:`incomplete`: cut off) ->
       ``(None, "incomplete JSON: ...")``: repairing it would make up its end.
    7. Otherwise (an object with single quotes, trailing commas, Python literals) ->
       :func:`~miniagent._internal.lenient.loads_lenient`, for texts up to 100,000
       characters: a dict -> ``(dict, None)``. What it refuses (a missing value, key,
       ``:`` or bracket; a bare word; text after the object) ->
       ``(None, "invalid JSON: <what is missing, where>")``: never a guessed value.

    ``(None, None)`` means "a bare value": the caller keeps the raw text and the
    tool registry maps it to a tool's single parameter, or reports the problem.
    Nothing raises, whatever the text.

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
        value = loads_limited(text, max_depth=MAX_DEPTH)
    except JSONLimitError as exc:
        return None, f"invalid JSON: {exc}"
    except ValueError as exc:
        reason = str(exc)
    else:
        if isinstance(value, dict):
            return value, None
        if isinstance(value, str):
            try:
                inner = _loads_dict(value)
            except JSONLimitError as exc:  # an object meant, and past a limit
                return None, f"invalid JSON: {exc}"
            if inner is not None:
                return inner, None
        return None, None
    if not text.startswith("{") or _bare_braces(text):
        return None, None
    glued = _glued(text)
    if glued:
        return None, f"invalid JSON: {glued}"
    if incomplete(text):
        return None, INCOMPLETE
    if len(text) > _REPAIR_MAX_CHARS:
        return None, (f"invalid JSON: {reason} (not repaired: longer than "
                      f"{_REPAIR_MAX_CHARS} characters)")
    try:
        repaired = loads_lenient(text, max_depth=MAX_DEPTH)
    except RefusedRepair as exc:
        return None, f"invalid JSON: {exc}"
    if isinstance(repaired, dict):
        return repaired, None
    return None, f"invalid JSON: {reason}"


def _bare_braces(text: str) -> bool:
    """``{temperature in SF}``: braces around words (no key, string or bracket inside): no
    attempt at an object."""
    inner = text[1:-1]
    return (text.endswith("}") and not any(ch in inner for ch in ":\"'{}[]")
            and any(ch.isalnum() for ch in inner))


def _glued(text: str) -> str | None:
    """Why ``text`` is two values, when a complete value is followed by another."""
    end = scan_end(text, 0)
    if end is None:
        return None
    rest = text[end:].lstrip()
    if rest[:1] in ("{", "[") and scan_end(rest, 0) is not None:
        return (f"two JSON values glued together (the second starts at character {end + 1}); "
                "send one object")
    return None


def _loads_dict(text: str) -> dict[str, Any] | None:
    """Strictly decode ``text`` if it is a JSON object, else ``None``.

    Raises:
        JSONLimitError: It is an object, too deep or with too long a number.
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = loads_limited(stripped, max_depth=MAX_DEPTH)
    except JSONLimitError:
        raise
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _short_reason(exc: BaseException) -> str:
    """A one-line reason for a decoding failure."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} has no JSON form")


def _writer() -> Callable[[Any], str]:
    """The C encoder itself, made once: ``json.dumps`` with an option builds a Python encoder
    per call, and ``JSONEncoder.encode`` a C one per call with a table for cycles (nesting past
    the interpreter's limit stops a cycle anyway); the stdlib's encoder where the C one is
    missing."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(ensure_ascii=False).encode
    chunks = make(None, _not_json, json.encoder.encode_basestring, None, ": ", ", ", False,
                  False, True)

    def write(value: Any) -> str:
        return "".join(chunks(value, 0))

    return write


write_json: Callable[[Any], str] = _writer()
"""What ``json.dumps(value, ensure_ascii=False)`` writes (every character kept as it is), at
a third of its cost for a small value. Raises :class:`TypeError` for a value JSON has no form
for, :class:`ValueError` for a number it cannot write and :class:`RecursionError` for a cycle
or nesting past the interpreter's limit.

Example:
    >>> write_json({"city": "北京", "n": [1, 2.5, None]})
    '{"city": "北京", "n": [1, 2.5, null]}'
"""

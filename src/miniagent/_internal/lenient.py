"""Decode the almost-JSON that models write, accepting only repairs that keep its meaning.

:func:`~miniagent._internal.jsonscan.decode_arguments` tries strict JSON first; what strict
decoding refused comes here. This reader accepts exactly these differences from JSON:

- strings in single quotes (a Python dict), line breaks and tabs written raw inside a
  string, and an unknown escape such as ``\\d`` kept as written;
- a trailing comma before ``}`` or ``]``;
- keys without quotes (``{to: "bob"}``);
- Python's ``True``, ``False`` and ``None``;
- comments (``//``, ``/* */``, ``#``) between tokens.

Everything else is refused, saying where and what is missing: a value after ``:``
(``{"body": }``), a member between two commas, a key before ``:``, a ``:`` after a key, a
closing bracket (or one of the wrong kind), a word that is no literal (``{"city": Paris}``:
a name, a misspelt ``true``, half a sentence?) and text after the value. Each of them
would need a guess to become a call, and a call never runs on a guess: the model is told
instead. The reader is one linear pass and nests no deeper than the depth it is given.

Example:
    >>> loads_lenient("{'to': 'bob', 'cc': None,}", max_depth=8)
    {'to': 'bob', 'cc': None}
    >>> try:
    ...     loads_lenient('{"to": "bob", "body": }', max_depth=8)
    ... except RefusedRepair as exc:
    ...     print(exc)
    the value of "body" is missing, found '}' (character 23)
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = ["RefusedRepair", "loads_lenient"]


class RefusedRepair(ValueError):
    """Text that only a guess could turn into a value; the message says what is missing."""


_LITERALS: dict[str, Any] = {
    "true": True, "false": False, "null": None, "True": True, "False": False, "None": None,
    "NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf"),
}
_WORD = re.compile(r"-?[^\W\d][\w$-]*")
_TOKEN = re.compile(r"[^\s,:\]}]{1,40}")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d*)?(?:[eE][+-]?\d+)?")
_SPACE = re.compile(r"(?:\s+|//[^\n]*|#[^\n]*|/\*.*?\*/)*", re.DOTALL)
_STRING_END = {q: re.compile(rf"[^{q}\\]*(?:\\.[^{q}\\]*)*{q}", re.DOTALL) for q in "\"'"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t"}
_CLOSERS = {"{": "}", "[": "]"}


def loads_lenient(text: str, *, max_depth: int) -> Any:
    """Decode ``text``, allowing only the meaning-keeping differences from JSON listed above.

    Args:
        text: The text, Markdown fences already removed.
        max_depth: The deepest nesting of arrays and objects accepted.

    Returns:
        The decoded value.

    Raises:
        RefusedRepair: What would have to be guessed, and at which character (1-based).
    """
    reader = _Reader(text, max_depth)
    value = reader.value(0)
    reader.skip()
    if reader.pos < len(text):
        raise reader.refuse(f"text after the end of the value, {reader.found()}")
    return value


class _Reader:
    """A cursor over the text; each method reads one kind of token at :attr:`pos`."""

    def __init__(self, text: str, max_depth: int) -> None:
        self.text = text
        self.pos = 0
        self.max_depth = max_depth

    def refuse(self, what: str) -> RefusedRepair:
        return RefusedRepair(f"{what} (character {self.pos + 1})")

    def found(self) -> str:
        if self.pos >= len(self.text):
            return "but the text ends (cut off)"
        return f"found {self.text[self.pos:self.pos + 12]!r}"

    def skip(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos:self.pos + 1]

    def value(self, depth: int, missing: str = "a value is missing") -> Any:
        ch = self.peek()
        if ch in _CLOSERS:
            if depth >= self.max_depth:
                raise self.refuse(f"nested deeper than {self.max_depth} levels")
            return self.object(depth + 1) if ch == "{" else self.array(depth + 1)
        if ch in ("\"", "'"):
            return self.string()
        if ch.isdigit() or ch == "-":
            number = self.number()
            if number is not None:
                return number
        if ch and ch not in ",}]:":
            return self.literal()
        raise self.refuse(f"{missing}, {self.found()}")

    def object(self, depth: int) -> dict[str, Any]:
        self.pos += 1
        result: dict[str, Any] = {}
        while self.peek() != "}":
            key = self.key()
            if self.peek() != ":":
                raise self.refuse(f"':' is missing after the key {_quoted(key)}, {self.found()}")
            self.pos += 1
            result[key] = self.value(depth, missing=f"the value of {_quoted(key)} is missing")
            if not self.comma("}"):
                break
        self.close("}")
        return result

    def key(self) -> str:
        ch = self.peek()
        if ch in ("\"", "'"):
            return self.string()
        match = _WORD.match(self.text, self.pos)
        if match and not match.group().startswith("-"):
            self.pos = match.end()
            return match.group()
        if ch == ",":
            raise self.refuse("a member is missing before this ','")
        if ch == ":":
            raise self.refuse("a key is missing before this ':'")
        raise self.refuse(f"a key in quotes expected, {self.found()}")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        while self.peek() != "]":
            if self.peek() == ",":
                raise self.refuse("a value is missing before this ','")
            result.append(self.value(depth))
            if not self.comma("]"):
                break
        self.close("]")
        return result

    def close(self, closer: str) -> None:
        """Read the ``}`` or ``]`` that ends an object or array."""
        if self.peek() != closer:
            raise self.refuse(f"',' or '{closer}' expected, {self.found()}")
        self.pos += 1

    def comma(self, closer: str) -> bool:
        """Read the ``,`` after a member; ``False`` when there is none (the end, or an error)."""
        if self.peek() != ",":
            return False
        self.pos += 1
        if self.peek() == ",":
            what = "a member" if closer == "}" else "a value"
            raise self.refuse(f"{what} is missing between two commas")
        return True  # a trailing comma is fine: the loop then meets the closer

    def string(self) -> str:
        quote = self.text[self.pos]
        match = _STRING_END[quote].match(self.text, self.pos + 1)
        if match is None:
            raise self.refuse("a string is never closed (cut off)")
        self.pos = match.end()
        return _unescape(match.group()[:-1])

    def number(self) -> int | float | None:
        match = _NUMBER.match(self.text, self.pos)
        if match is None or not match.group().strip("-"):
            return None
        end = match.end()
        if end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "_."):
            raise self.refuse(f"not a number, {self.found()}")
        written = match.group()
        try:
            value: int | float = float(written) if set(written) & set(".eE") else int(written)
        except ValueError:  # past the digit limit
            raise self.refuse(
                f"a number with more than {sys.get_int_max_str_digits()} digits") from None
        self.pos = end
        return value

    def literal(self) -> Any:
        """``true``, ``None``, ``-Infinity``...; any other word or sign is refused."""
        match = _WORD.match(self.text, self.pos) or _TOKEN.match(self.text, self.pos)
        word = match.group() if match else self.text[self.pos:self.pos + 1]
        if word in _LITERALS:
            self.pos += len(word)
            return _LITERALS[word]
        raise self.refuse(f"{word!r} is no JSON value: write text in quotes, "
                          "or true, false or null")


def _quoted(key: str) -> str:
    return '"' + key[:60] + '"'


def _unescape(body: str) -> str:
    """The string's content with its escapes read; an unknown one (``\\d``) kept as written."""
    if "\\" not in body:
        return body
    text = _ESCAPE.sub(_escaped, body)
    if "\\u" in body:  # two \\u escapes may be one character (a surrogate pair)
        try:
            return text.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:  # a lone surrogate stays, as json.loads keeps it
            return text
    return text


def _escaped(match: re.Match[str]) -> str:
    code = match.group(1)
    if len(code) == 5:
        return chr(int(code[1:], 16))
    return _ESCAPES.get(code, match.group())

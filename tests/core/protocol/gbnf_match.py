"""A tiny backtracking GBNF matcher for the constructs miniagent's grammar generator emits.

It checks texts against a generated grammar without llama.cpp (which only says whether a
grammar parses, not what it accepts).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

Node = tuple[Any, ...]
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "]": "]", "[": "[", "-": "-"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def char(self) -> str:
        c = self.text[self.pos]
        self.pos += 1
        if c != "\\":
            return c
        e = self.text[self.pos]
        self.pos += 1
        if e in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[e]
            value = int(self.text[self.pos : self.pos + width], 16)
            self.pos += width
            return chr(value)
        return _ESCAPES[e]

    def alternatives(self) -> Node:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return ("alt", options)

    def sequence(self) -> Node:
        items: list[Node] = []
        self.skip()
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified(self.item()))
            self.skip()
        return ("seq", items)

    def item(self) -> Node:
        c = self.peek()
        if c == '"':
            self.pos += 1
            out = []
            while self.peek() != '"':
                out.append(self.char())
            self.pos += 1
            return ("lit", "".join(out))
        if c == "[":
            return self.char_class()
        if c == "(":
            self.pos += 1
            node = self.alternatives()
            assert self.peek() == ")"
            self.pos += 1
            return node
        m = re.compile(r"[a-zA-Z0-9-]+").match(self.text, self.pos)
        assert m, f"bad grammar at {self.text[self.pos :]!r}"
        self.pos = m.end()
        return ("ref", m.group())

    def char_class(self) -> Node:
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges = []
        while self.peek() != "]":
            low = self.char()
            high = low
            if self.peek() == "-" and self.text[self.pos + 1] != "]":
                self.pos += 1
                high = self.char()
            ranges.append((low, high))
        self.pos += 1
        return ("cls", negated, ranges)

    def quantified(self, node: Node) -> Node:
        c = self.peek()
        if c in "?*+" and c:
            self.pos += 1
            return ("rep", node, 0 if c != "+" else 1, 1 if c == "?" else None)
        if c == "{":
            end = self.text.index("}", self.pos)
            low, _, high = self.text[self.pos + 1 : end].partition(",")
            self.pos = end + 1
            return ("rep", node, int(low), int(high) if high else None)
        return node


def parse_gbnf(text: str) -> dict[str, Node]:
    rules: dict[str, Node] = {}
    for line in text.strip().splitlines():
        name, _, body = line.partition(" ::= ")
        parser = _Parser(body)
        rules[name] = parser.alternatives()
        assert parser.pos == len(body), f"unparsed rest in {line!r}"
    return rules


def _match(rules: dict[str, Node], node: Node, s: str, i: int) -> Iterator[int]:
    kind = node[0]
    if kind == "lit":
        if s.startswith(node[1], i):
            yield i + len(node[1])
    elif kind == "cls":
        if i < len(s):
            inside = any(lo <= s[i] <= hi for lo, hi in node[2])
            if inside != node[1]:
                yield i + 1
    elif kind == "ref":
        yield from _match(rules, rules[node[1]], s, i)
    elif kind == "alt":
        for option in node[1]:
            yield from _match(rules, option, s, i)
    elif kind == "seq":
        yield from _seq(rules, node[1], s, i)
    else:
        yield from _rep(rules, node[1], node[2], node[3], s, i, 0)


def _seq(rules: dict[str, Node], items: list[Node], s: str, i: int) -> Iterator[int]:
    if not items:
        yield i
        return
    for j in _match(rules, items[0], s, i):
        yield from _seq(rules, items[1:], s, j)


def _rep(
    rules: dict[str, Node], node: Node, low: int, high: int | None, s: str, i: int, n: int
) -> Iterator[int]:
    if high is None or n < high:
        for j in _match(rules, node, s, i):
            if j > i:
                yield from _rep(rules, node, low, high, s, j, n + 1)
    if n >= low:
        yield i


def accepts(grammar: str, text: str, start: str = "root") -> bool:
    rules = parse_gbnf(grammar)
    return any(end == len(text) for end in _match(rules, ("ref", start), text, 0))

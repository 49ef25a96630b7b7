"""Counted nouns read right (``1 step``, ``2 steps``), and no message repeats a word."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from miniagent._internal.wording import counted

SOURCE = Path(__file__).parents[2] / "src" / "miniagent"
DOUBLED = re.compile(r"\b([a-z]+)\s+\1\b")  # "on on", "at at", "the the"; not "url URL"


@pytest.mark.parametrize(("n", "noun", "expected"), [
    (1, "step", "1 step"), (2, "step", "2 steps"), (0, "tool", "0 tools"),
    (1, "task run", "1 task run"), (3, "task run", "3 task runs"),
    (2, "reply", "2 replies"), (2, "day", "2 days"), (2, "match", "2 matches"),
    (2, "box", "2 boxes"), (12345, "token", "12,345 tokens"), (-1, "step", "-1 steps"),
])
def test_counted_nouns(n: int, noun: str, expected: str) -> None:
    assert counted(n, noun) == expected


def test_an_irregular_plural_is_given() -> None:
    assert (counted(1, "child", "children"), counted(2, "child", "children")) == (
        "1 child", "2 children")


def literal_texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal with its line; an f-string's parts joined around a ``{}``."""
    found, parts = [], set()
    for node in ast.walk(tree):  # an f-string is met before its parts
        if isinstance(node, ast.JoinedStr):
            parts.update(id(part) for part in node.values)
            text = "".join(part.value if isinstance(part, ast.Constant) else "{}"
                           for part in node.values)
            found.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in parts:
            found.append((node.lineno, node.value))
    return found


def test_no_string_of_the_package_doubles_a_word() -> None:
    doubled = [f"{path.relative_to(SOURCE.parent)}:{line}: {match.group(0)!r}"
               for path in sorted(SOURCE.rglob("*.py"))
               for line, text in literal_texts(ast.parse(path.read_text(encoding="utf-8")))
               for match in DOUBLED.finditer(text)]
    assert not doubled, "doubled words:\n" + "\n".join(doubled)


def test_the_scan_finds_a_doubled_word_across_joined_literals() -> None:
    tree = ast.parse('message = ("it goes on "\n           "on the cluster")\nf"at {x} at at"')
    texts = [text for _, text in literal_texts(tree)]
    assert [m.group(0) for t in texts for m in DOUBLED.finditer(t)] == ["on on", "at at"]

"""The package layers: no import cycle between miniagent's packages (module-level imports)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).parents[1] / "src" / "miniagent"


def _part(parts: tuple[str, ...]) -> str:
    """A core package or module is named without its ``core`` folder."""
    return parts[1] if parts[0] == "core" and len(parts) > 1 else parts[0]


def package_imports() -> dict[str, set[str]]:
    """Which top-level parts of miniagent each part imports at module level."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        source = _part(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("miniagent."):
                target = _part(tuple((node.module or "").split(".")[1:]))
                if target != source:
                    edges[source].add(target)
    return edges


def test_no_package_imports_itself_back() -> None:
    edges = package_imports()
    for start in list(edges):
        stack, seen = [start], set()
        while stack:
            current = stack.pop()
            for nxt in edges.get(current, ()):
                assert nxt != start, f"{start} imports itself back through {current}"
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)


def test_tools_and_the_step_logic_know_no_driver() -> None:
    edges = package_imports()
    assert not edges["tools"] & {"runtime", "agent", "temporal", "cli"}
    assert not edges["runtime"] & {"agent", "temporal", "cli"}
    assert not edges["protocol"] & {"runtime", "tools", "models", "agent", "temporal"}

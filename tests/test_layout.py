"""The layers of miniagent: every import goes down the layer order, and no cycle of imports
joins two modules (of two parts, or of one).

Every import statement counts, at module level and inside functions and methods (such an
import runs the first time its function does: a dependency all the same), and so does
``importlib.import_module`` of a written name; only imports under ``if TYPE_CHECKING:``,
which never run, are left out. A part is a top-level folder or module of the package; each
folder or module of the core is a part of its own (``core.tools``), and so are the package's
``__init__`` (the public API, ``miniagent``) and ``__main__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).parents[1] / "src" / "miniagent"

LAYERS = (
    # the core, lowest first
    "core",  # the core package's __init__: a docstring, it imports nothing
    "core.errors",  # the exception tree: imports nothing, so _internal may raise its errors
    "_internal",
    "core.types",
    "core.settings",  # the value types Agent takes (model settings, aids, memory settings)
    "core.protocol",
    "core.session",
    "core.retry",
    "core.throttles",
    "core.store",
    "core.models",
    "core.tools",
    "core.runtime",
    "core.output",  # typed results: an output type made a JSON Schema, and back
    "core.trace",  # the JSONL trace file Agent(trace=...) writes, and redaction
    "core.agent_setup",  # what an Agent's arguments become
    "core.agent",
    # the extensions, each on the core and those below it, lowest first
    "observe",
    "memory",
    "mcp",
    "evals",
    "report",  # the HTML reports: of traces (observe) and of evals
    "temporal",
    "ui",
    "testing",  # the stub servers: for tests and the CLI's demo, never for the library
    "cli",
    # the public API and the command
    "miniagent",
    "__main__",
)
"""Every part of the package, lowest first: a part imports only parts before it."""

KNOWN_EDGES = frozenset({
})
"""Edges against the order, or closing a cycle, that other changes are removing now; empty
once they are in."""

OPEN_EDGES: frozenset[tuple[str, str]] = frozenset()
"""Edges against the order, or closing a cycle, that no change removes yet: empty, and to stay
so."""


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` but those in the body of an ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _statements(other)
            continue
        yield child
        yield from _statements(child)


def _named(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement (or ``import_module("...")``) reaches for."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: from the module's own package up
            package = module.split(".")[: len(module.split(".")) - node.level + is_package]
            base = ".".join([*package, *([base] if base else [])])
        yield from (f"{base}.{alias.name}" for alias in node.names)
    elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)
          and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"):
        yield node.args[0].value


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolved(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` is, or is in (``pkg.mod.Class`` -> ``pkg.mod``); None outside."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(source: str, module: str, known: dict[str, Path],
            is_package: bool = False) -> set[str]:
    """The package's modules that ``source`` (the module ``module``) imports."""
    found = set()
    for node in _statements(ast.parse(source)):
        for name in _named(node, module, is_package):
            target = _resolved(name, known)
            if target is not None and target != module:
                found.add(target)
    return found


@cache
def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports (read once)."""
    known = modules()
    return {name: imports(path.read_text(encoding="utf-8"), name, known,
                          path.name == "__init__.py")
            for name, path in known.items()}


def part(module: str) -> str:
    """The part a module belongs to: ``miniagent.core.tools.toolbox`` -> ``core.tools``."""
    names = module.split(".")[1:]
    if not names:
        return "miniagent"
    return f"core.{names[1]}" if names[0] == "core" and len(names) > 1 else names[0]


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def _allowed_graph() -> dict[str, set[str]]:
    allowed = KNOWN_EDGES | OPEN_EDGES
    return {module: {t for t in targets if (module, t) not in allowed}
            for module, targets in import_graph().items()}


def test_every_part_has_its_layer() -> None:
    unplaced = sorted({part(module) for module in modules()} - set(LAYERS))
    assert not unplaced, f"parts missing from LAYERS: {unplaced}"


def test_no_part_imports_a_part_above_it() -> None:
    rank = {name: n for n, name in enumerate(LAYERS)}
    upward = sorted(
        f"{module} -> {target} ({part(module)} imports {part(target)}, above it)"
        for module, targets in _allowed_graph().items() for target in targets
        if rank.get(part(target), -1) > rank.get(part(module), len(LAYERS)))
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_no_cycle_joins_modules_of_two_parts() -> None:
    crossing = [sorted(group) for group in _cycles(_allowed_graph())
                if len({part(module) for module in group}) > 1]
    assert not crossing, f"import cycles across parts: {crossing}"


def test_no_cycle_joins_two_modules() -> None:
    """Not inside one part either: a circle between two modules (each importing the other
    inside a function, to be loadable) makes neither readable alone."""
    cycles = [sorted(group) for group in _cycles(_allowed_graph())]
    assert not cycles, f"import cycles: {cycles}"


def test_every_allowed_edge_still_exists() -> None:
    """An edge that is gone leaves the allow-lists, so they only shrink."""
    graph = import_graph()
    gone = sorted(edge for edge in KNOWN_EDGES | OPEN_EDGES
                  if edge[1] not in graph.get(edge[0], ()))
    assert not gone, f"edges no longer imported, to drop from the lists: {gone}"


def test_the_walk_sees_imports_in_functions_and_skips_type_checking() -> None:
    known = {name: Path() for name in ("miniagent.a", "miniagent.b", "miniagent.c",
                                       "miniagent.d", "miniagent.e", "miniagent.f")}
    source = """
from typing import TYPE_CHECKING
import miniagent.a
if TYPE_CHECKING:
    from miniagent.f import Hint
else:
    from miniagent import e
def later():
    from miniagent.b import thing
    class Inner:
        def method(self):
            import importlib
            return importlib.import_module("miniagent.c")
def unrelated():
    from . import d
"""
    found = imports(source, "miniagent.x", known)
    assert found == {"miniagent.a", "miniagent.b", "miniagent.c", "miniagent.d", "miniagent.e"}


def test_the_cycle_finder_finds_a_loop_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _cycles(graph) == [{"a", "b", "c"}]

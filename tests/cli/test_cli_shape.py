"""The command line's shape: only its entry ends the process, and no two of its modules import
each other (every import counted: in functions and under ``TYPE_CHECKING`` too)."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(__file__).parents[2] / "src" / "miniagent" / "cli"
ENTRY = CLI / "__init__.py"
"""Holds ``main()``, the one place the process exits."""

EXITS = {("os", "_exit"), ("sys", "exit")}


def _modules() -> dict[str, Path]:
    return {("miniagent.cli" if path == ENTRY else f"miniagent.cli.{path.stem}"): path
            for path in sorted(CLI.glob("*.py"))}


def _exits(tree: ast.AST) -> list[int]:
    """Lines that call ``os._exit`` or ``sys.exit``, or import either by name."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) \
                and (node.func.value.id, node.func.attr) in EXITS:
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and any(
                (node.module, alias.name) in EXITS for alias in node.names):
            lines.append(node.lineno)
    return lines


def test_only_the_entry_ends_the_process() -> None:
    found = {path.name: lines for path in CLI.glob("*.py") if path != ENTRY
             if (lines := _exits(ast.parse(path.read_text(encoding="utf-8"))))}
    assert found == {}, "raise typer.Exit (or fail()) and let main() exit"
    assert _exits(ast.parse(ENTRY.read_text(encoding="utf-8")))  # the check sees a call


def _imported(name: str, tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The CLI modules that ``name``'s module imports anywhere in it."""
    found: set[str] = set()
    package = name if name == "miniagent.cli" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1 folders
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        found |= {t for t in targets if t in modules and t != name}
    return found


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for nxt in sorted(edges[module]):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(edges):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_no_import_cycle_in_the_cli() -> None:
    modules = _modules()
    edges = {name: _imported(name, ast.parse(path.read_text(encoding="utf-8")), modules)
             for name, path in modules.items()}
    assert edges["miniagent.cli.sessions"]  # the walk sees the imports
    assert _cycle(edges) is None, " -> ".join(_cycle(edges) or [])


def test_the_cycle_finder_finds_one() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(edges) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


MAIN_WITH_ATEXIT = ("import atexit; atexit.register(print, 'atexit ran'); "
                    "from miniagent.cli import main; main()")


def _main(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", MAIN_WITH_ATEXIT, *args], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_main_leaves_at_once_after_a_temporal_client_and_keeps_the_code(
        tmp_path: Path) -> None:
    """After a Temporal client, main() leaves with os._exit (no atexit: the SDK may abort
    there), with the command's code and its one line; any other command exits as Python
    does."""
    pytest.importorskip("temporalio")
    refused = _main("sessions", "list", "--temporal", f"127.0.0.1:{_closed_port()}")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith("miniagent: cannot reach Temporal at 127.0.0.1:")
    listed = _main("sessions", "list", "--store", str(tmp_path / "s.db"), "--json")
    assert (listed.returncode, listed.stdout) == (0, "[]\natexit ran\n"), listed.stderr


OPTIONAL_AT_START = ("miniagent.evals", "miniagent.report", "miniagent.temporal", "temporalio",
                     "pydantic")
"""What only some commands use: ``miniagent --help`` and every other command load it when
they use it, not at start."""


def test_the_start_loads_only_what_every_command_needs() -> None:
    """Loading the command line (what ``miniagent --help`` does before printing) loads no
    part of the evals, reports or Temporal, nor pydantic: each loads with a command that
    uses it."""
    probe = ("import json, sys; import miniagent.cli; lazy = " + repr(OPTIONAL_AT_START)
             + "; print(json.dumps(sorted(m for m in sys.modules if m in lazy "
               "or m.startswith(tuple(n + '.' for n in lazy)))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"

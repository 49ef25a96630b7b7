"""Load @tool functions for the CLI from a Python file, a module, or the built-ins."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from miniagent.errors import UserError
from miniagent.tools.registry import Tool, ToolRegistry


def load_tools(sources: Iterable[str], workspace: Path) -> ToolRegistry:
    """One registry with the tools of every source; ``builtin`` means the safe built-ins."""
    registry = ToolRegistry()
    for source in sources:
        for found in _tools_of(source, workspace):
            registry.register(found)
    return registry


def _tools_of(source: str, workspace: Path) -> list[Tool]:
    if source == "builtin":
        from miniagent.tools.builtin import builtin_tools

        return builtin_tools(workspace)
    module = _import(source)
    found = [value for value in vars(module).values() if isinstance(value, Tool)]
    if not found:
        raise UserError(f"no @tool functions found in {source!r}")
    return found


def _import(source: str) -> ModuleType:
    path = Path(source)
    if source.endswith(".py") or path.is_file():
        if not path.is_file():
            raise UserError(f"tools file not found: {source}")
        name = f"miniagent_user_tools_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UserError(f"cannot load tools from {source}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise UserError(f"loading {source} failed: {type(exc).__name__}: {exc}") from exc
        return module
    try:
        return importlib.import_module(source)
    except ImportError as exc:
        raise UserError(f"cannot import tools module {source!r}: {exc}") from exc

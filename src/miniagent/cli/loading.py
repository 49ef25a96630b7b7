"""Load @tool functions for the CLI from a Python file, a module, or the built-ins."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from miniagent.core.errors import UserError
from miniagent.core.tools.tool import Tool
from miniagent.core.tools.toolbox import ToolRegistry, ToolSource


def load_tools(sources: Iterable[str], workspace: Path) -> ToolRegistry:
    """One registry with the tools of every source; ``builtin`` means the safe built-ins."""
    registry = ToolRegistry()
    for source in sources:
        for found in _tools_of(source, workspace):
            registry.register(found)
    return registry


def listed_schemas(sources: Sequence[ToolSource]) -> list[dict[str, Any]]:
    """The OpenAI schemas of what ``sources`` offer (MCP servers are started, asked, and
    closed again); what ``miniagent tools`` prints."""
    if not sources:
        return []
    from miniagent._internal.aio import run_coroutine
    from miniagent.core.tools.toolbox import Toolbox

    async def listed() -> list[dict[str, Any]]:
        try:
            return (await Toolbox.gather(sources)).openai_schemas()
        finally:
            await asyncio.gather(*(source.aclose() for source in sources),
                                 return_exceptions=True)

    return run_coroutine(listed())


def _tools_of(source: str, workspace: Path) -> list[Tool]:
    if source == "builtin":
        from miniagent.core.tools.builtin import builtin_tools

        return builtin_tools(workspace)
    found = module_tools(_import(source))
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
        except (Exception, SystemExit) as exc:  # the user's code: anything may come out
            del sys.modules[name]
            raise UserError(f"loading tools from {source} failed: {_failure(exc)}") from None
        return module
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as exc:
        if exc.name is None or not source.startswith(exc.name):
            raise UserError(f"loading tools module {source!r} failed: {_failure(exc)}") from None
        raise UserError(f"cannot import tools module {source!r}: {exc}") from None
    except (Exception, SystemExit) as exc:
        raise UserError(f"loading tools module {source!r} failed: {_failure(exc)}") from None


def _failure(exc: BaseException) -> str:
    """``Type: message (at file:line)``, in one line: what went wrong while importing, where."""
    message = " ".join(str(exc).split())
    if isinstance(exc, SyntaxError):
        message = " ".join(str(exc.msg).split())
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else ""
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if not f.filename.startswith("<")]  # importlib's frozen frames say nothing
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"{text} (at {where})" if where else text


def module_tools(module: ModuleType) -> list[Tool]:
    """The module-level tools of ``module``: ``@tool`` functions and ``Tool`` objects."""
    return [value for value in vars(module).values() if isinstance(value, Tool)]


def import_source(source: str) -> ModuleType:
    """The module of a tools file (executed again on each call) or of a module name.

    Raises:
        UserError: it cannot be found or importing it failed; one line.
    """
    return _import(source)

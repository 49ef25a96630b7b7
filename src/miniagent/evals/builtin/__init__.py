"""The bundled eval set (``miniagent eval --builtin``): tasks, deterministic tools, fixtures."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
TASKS = HERE / "tasks.jsonl"
TOOLS = HERE / "tools.py"
FIXTURES = HERE / "fixtures"

__all__ = ["FIXTURES", "TASKS", "TOOLS"]

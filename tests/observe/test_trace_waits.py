"""A wait for a slot (a tool's ``max_concurrency``) is kept in the JSONL trace and shown by
``miniagent trace show`` and the trace report, as the live trace shows it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from miniagent import Agent, ScriptedModel, tool
from miniagent.observe.reader import read_trace
from miniagent.report.trace import render_trace

HOSTILE = "<img src=x onerror=alert(1)>"


def _run_with_a_wait(path: Path) -> None:
    @tool(name="slow_lookup", max_concurrency=1)
    async def slow_lookup(key: str) -> str:
        """Look a key up, one call at a time."""
        await asyncio.sleep(0.05)
        return f"{key}: found"

    two_calls = {"content": "", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "slow_lookup", "arguments": '{"key": "a"}'}},
        {"id": "c2", "type": "function",
         "function": {"name": "slow_lookup", "arguments": f'{{"key": "{HOSTILE}"}}'}}]}
    model = ScriptedModel([two_calls, {"content": "both found"}], tool_mode="native")
    result = Agent(model=model, tools=[slow_lookup], trace=path).run("Look a and b up")
    assert result.status == "completed", result.reason


def test_the_wait_is_read_back_rendered_and_shown(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    _run_with_a_wait(path)

    step = read_trace(path).runs[0].steps[0]
    assert [(w["what"], w["reason"]) for w in step.waits] == [
        ("tool slow_lookup", "1 call at once (max_concurrency)")]
    assert step.waits[0]["call_id"] in {"c1", "c2"}

    html = render_trace(read_trace(path))
    assert "Waited for a slot: tool slow_lookup (call c" in html
    assert HOSTILE not in html  # the arguments stay text

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    shown = subprocess.run([sys.executable, "-m", "miniagent", "trace", "show", str(path)],
                           capture_output=True, text=True, timeout=120, env=env, check=True)
    assert ("  Waited for a slot: tool slow_lookup (1 call at once (max_concurrency))"
            in shown.stdout.splitlines())

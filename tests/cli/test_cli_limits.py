"""The live trace shows a call waiting for a slot (a tool's max_concurrency), and the limit
flags reach the model."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import cli

from miniagent.cli.build import RunConfig, build_model
from miniagent.core.throttles import EndpointLimits
from miniagent.testing.stub_server import StubServer

TOOLS = '''
import asyncio

from miniagent import tool
from miniagent.core.throttles import tool_slots


@tool(max_concurrency=1)
async def lookup(key: str) -> str:
    """Look a key up (one lookup at a time)."""
    for _ in range(1000):  # the first call holds its slot until the second waits (<= 10 s)
        if tool_slots(lookup).queued or key == "b":
            break
        await asyncio.sleep(0.01)
    return f"value of {key}"
'''


def test_the_trace_shows_a_call_waiting_for_a_slot(tmp_path: Path) -> None:
    (tmp_path / "lookups.py").write_text(TOOLS, encoding="utf-8")
    script = [{"content": None, "tool_calls": [
        {"name": "lookup", "arguments": {"key": "a"}},
        {"name": "lookup", "arguments": {"key": "b"}}]}, "both found"]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "Look up a and b", "--tools", "lookups.py", "--mode", "native",
                  "--base-url", stub.base_url, "--model", "m", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "waiting for a slot: tool lookup (1 call at once (max_concurrency))" in out.stdout
    assert out.stdout.count("Observation") == 2 and "both found" in out.stdout


def test_the_limit_flags_reach_the_model(tmp_path: Path) -> None:
    config = RunConfig(base_url="http://127.0.0.1:9/v1", model="m", model_concurrency=2,
                       requests_per_minute=30, tokens_per_minute=50_000)
    model = build_model(config, None)
    assert model.limits == EndpointLimits(  # type: ignore[attr-defined]
        max_concurrency=2, requests_per_minute=30, tokens_per_minute=50_000)
    with StubServer(["Final Answer: ok"]).run_in_thread() as stub:
        out = cli("run", "hi", "--json", "--mode", "react", "--base-url", stub.base_url,
                  "--model", "m", "--model-concurrency", "2", "--requests-per-minute", "30",
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "completed"

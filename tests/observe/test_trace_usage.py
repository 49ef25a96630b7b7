"""Usage a server did not report, in a JSONL trace and what reads it back (``trace show``, the
trace page): null counts and an estimate, never 0 tokens."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_trace_cli import cli

from miniagent import Agent, OpenAICompatibleModel, tool
from miniagent.observe.reader import read_trace
from miniagent.report.trace import render_trace
from miniagent.testing.stub_server import StubServer

SCRIPT: list[Any] = [
    {"content": 'Thought: 查天气\nAction: weather\nAction Input: {"city": "北京"}'},
    {"content": "Thought: done\nFinal Answer: 12°C，多云", "usage": None},  # none reported
]


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return "12°C，多云"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace of a run whose first reply reports usage (10 + 5) and whose second does not."""
    path = tmp_path_factory.mktemp("usage") / "run.jsonl"
    with StubServer(SCRIPT).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="react")
        result = Agent(model=model, tools=[weather], trace=path).run("北京天气？")
    assert result.status == "completed" and result.usage.total_tokens is None
    return path


def records(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in lines if r["kind"] == kind]


def test_the_records_keep_null_counts_and_the_estimate(traced: Path) -> None:
    reported, unreported = (r["response"]["usage"] for r in records(traced, "model_responded"))
    assert reported == {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0}
    assert (unreported["prompt_tokens"], unreported["completion_tokens"]) == (None, None)
    assert unreported["estimated_tokens"] > 0
    (finished,) = records(traced, "run_finished")
    total = finished["result"]["usage"]
    assert total["prompt_tokens"] is None
    assert total["estimated_tokens"] == 15 + unreported["estimated_tokens"]


def test_the_reader_reads_them_back_unknown(traced: Path) -> None:
    (run,) = read_trace(traced).runs
    first, second = (step.usage for step in run.steps)
    assert (first.known, first.total_tokens) == (True, 15)
    assert (second.known, second.total_tokens) == (False, None) and second.estimated_tokens
    assert run.usage.total_tokens is None
    assert run.usage.counted_tokens == 15 + second.estimated_tokens


def test_trace_show_says_estimated(traced: Path) -> None:
    out = cli("trace", "show", str(traced), cwd=traced.parent)
    assert out.returncode == 0, out.stderr
    steps = re.findall(r"── step \d · model [\d.]+ s · (.*)", out.stdout)
    assert steps[0] == "10 prompt + 5 completion tokens"
    assert re.fullmatch(r"tokens not reported, ~[\d,]+ estimated", steps[1])
    assert re.search(r"completed · 2 steps · ~[\d,]+ tokens \(estimated\) · ", out.stdout)


def test_the_trace_page_shows_the_estimate_apart(traced: Path) -> None:
    page = render_trace(read_trace(traced))
    (run,) = read_trace(traced).runs
    estimate = run.steps[1].usage.estimated_tokens
    assert f"~{run.usage.counted_tokens:,} tokens (estimated)" in page
    assert f"~{estimate:,} tok (estimated)" in page
    assert f"tokens not reported, ~{estimate:,} estimated" in page
    bars = re.findall(r'data-series="not reported, estimated" data-value="(\d+)"', page)
    assert bars == ["0", str(estimate)]
    assert "0 prompt (0 cached) + 0 completion" not in page

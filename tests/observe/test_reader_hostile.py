"""A trace file is untrusted input: any field of any record may hold anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, Limits, ScriptedModel, tool
from miniagent._internal.wording import counted
from miniagent.cli.trace_show import trace_lines
from miniagent.observe.reader import read_trace
from miniagent.report.trace import render_trace

JUNK: list[Any] = [None, "x", -1, 1e308, 10**400, True, [], ["a", 1], {}, {"a": [1]},
                   "</script><img src=x onerror=alert(1)>"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    model = ScriptedModel(['Thought: add\nAction: add\nAction Input: {"a": 1, "b": 2}',
                           "gibberish", "Final Answer: 3"])
    Agent(model=model, tools=[add], trace=path, limits=Limits(max_observation_chars=1)).run("1+2?")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_field_replaced_by_junk_still_renders(records: list[dict[str, Any]],
                                                    tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    rendered = 0
    for position, record in enumerate(records):
        for key in record:
            if key == "kind":
                continue
            for junk in JUNK:
                changed = [dict(r) for r in records]
                changed[position][key] = junk
                path.write_text("\n".join(json.dumps(r) for r in changed), encoding="utf-8")
                trace = read_trace(path)
                assert "\n".join(trace_lines(trace, full=True))
                html = render_trace(trace)
                assert "<img src=x" not in html
                rendered += 1
    assert rendered > 500


def test_values_inside_requests_and_results_may_be_anything(
        records: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    for junk in JUNK:
        changed = json.loads(json.dumps(records))
        for record in changed:
            for value in record.values():
                if isinstance(value, dict):
                    for inner in list(value):
                        value[inner] = junk
        path.write_text("\n".join(json.dumps(r) for r in changed), encoding="utf-8")
        trace = read_trace(path)
        assert "\n".join(trace_lines(trace, full=True))
        assert "<img src=x" not in render_trace(trace)


@pytest.mark.parametrize("steps", ["\x1b]0;pwned\x07", "3 steps \x1b[2J", 1e308 * 10, None, [1]])
def test_the_footer_prints_the_step_count_only_as_a_number(
        records: list[dict[str, Any]], tmp_path: Path, steps: Any) -> None:
    changed = json.loads(json.dumps(records))
    finished = next(r for r in changed if r["kind"] == "run_finished")
    finished["result"]["steps"] = steps
    path = tmp_path / "steps.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in changed), encoding="utf-8")
    trace = read_trace(path)
    footer = list(trace_lines(trace, full=True))[-1]
    assert "\x1b" not in footer and "pwned" not in footer and "inf" not in footer
    assert f" · {counted(len(trace.runs[0].steps), 'step')} · " in footer


def test_the_footer_shows_a_recorded_step_count(records: list[dict[str, Any]],
                                                tmp_path: Path) -> None:
    changed = json.loads(json.dumps(records))
    next(r for r in changed if r["kind"] == "run_finished")["result"]["steps"] = 7
    path = tmp_path / "steps.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in changed), encoding="utf-8")
    assert " · 7 steps · " in "\n".join(trace_lines(read_trace(path), full=True))

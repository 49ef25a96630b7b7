"""``trace html`` grows linearly with the steps of a trace.

Counted, not timed: the test counts the Python lines executed while a trace of N and of 2N
steps is read and rendered. Linear work doubles; a scan of every step per record (what made
40k steps take a minute) quadruples.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from miniagent.report.trace import write_trace_html


def write_trace(path: Path, steps: int) -> None:
    """A trace of one run with ``steps`` steps, each a model call and a tool call, the records
    shaped as the JSONL tracer writes them (a prompt of constant size, so the page's size is
    linear in the steps too)."""
    lines = []

    def record(kind: str, step: int, at: float, span: str, **fields: Any) -> None:
        lines.append(json.dumps({"v": 1, "kind": kind, "session_id": "s", "span_id": span,
                                 "step": step, "at": at, **fields}))

    record("run_started", 0, 0.0, "run", question="天气?", model="m")
    for n in range(1, steps + 1):
        call = {"id": f"c{n}", "name": "weather", "arguments": {"city": "北京"}}
        record("step_started", n, n, f"s{n}")
        record("model_started", n, n, f"m{n}",
               request={"messages": [{"role": "user", "content": "天气?"}]})
        record("model_responded", n, n + 0.1, f"m{n}", elapsed=0.1,
               response={"content": "Action: weather", "usage": {"prompt_tokens": 9}},
               parsed={"kind": "action", "tool_calls": [call]})
        record("tool_started", n, n + 0.2, f"t{n}", call=call)
        record("tool_finished", n, n + 0.3, f"t{n}", call=call,
               observation={"output": "12°C", "elapsed": 0.1})
        record("step_finished", n, n + 0.4, f"s{n}")
    record("run_finished", 0, steps + 1.0, "run", result={"status": "max_steps"})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def lines_executed(work: Callable[[], object]) -> int:
    """How many Python lines ``work()`` executes (a count that does not depend on the
    machine's speed or load)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        count += event == "line"
        return tracer

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(before)
    return count


def test_reading_and_rendering_a_trace_is_linear_in_its_steps(tmp_path: Path) -> None:
    counts = []
    for steps in (300, 600):
        trace = tmp_path / f"{steps}.jsonl"
        write_trace(trace, steps)
        out = tmp_path / f"{steps}.html"
        counts.append(lines_executed(lambda: write_trace_html(trace, out)))  # noqa: B023
        assert out.read_text(encoding="utf-8").count('class="step"') == steps
    assert counts[1] < 2.3 * counts[0], counts  # doubled steps: about doubled work

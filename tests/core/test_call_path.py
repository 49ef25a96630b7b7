"""One tool call and its answer runs code in a bounded number of files (issue 34).

The scenario and its tracer are ``benchmarks/call_path.py``'s (which prints the path in order);
this test runs them and bounds the count, so a change that spreads the path of a call over more
modules is seen.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

MAX_FILES = 15
"""The files of ``src/miniagent`` that run code on the path; lowered as modules merge."""

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "call_path.py"


def test_one_tool_call_runs_code_in_few_files() -> None:
    spec = importlib.util.spec_from_file_location("call_path_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)

    result, calls = benchmark.call_path()

    assert (result.status, result.final_answer) == ("completed", "5")
    assert "core/runtime/loop.py" in calls  # the tracer saw the run
    path = "\n".join(f"  {name} ({count} calls)" for name, count in calls.items())
    assert len(calls) <= MAX_FILES, (
        f"one tool call ran code in {len(calls)} files (at most {MAX_FILES}), in order:\n{path}")

"""The eval report's fault table says what was injected, and nothing where nothing was
(issue 36: "tool calls seen 0" on a run with no faults, whose tools were called)."""

from __future__ import annotations

import re
from typing import Any

from test_eval_report_links import failed_run

from miniagent.evals.metrics import summarize
from miniagent.report.evals import render


def fault_row(report: dict[str, Any]) -> list[str]:
    """The cells of the fault table's row of the react mode."""
    table = render(report).split("<h2>Faults: injected and met</h2>", 1)[1]
    row = re.search(r"<tr><td>react</td>(.*?)</tr>", table, flags=re.DOTALL)
    assert row is not None, table[:2000]
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_no_tool_fault_injected_shows_no_count_of_calls_seen() -> None:
    run = failed_run("t", None) | {"calls_made": 3, "faults_injected":
                                   {"tool_calls_seen": 0, "tool_failures": 0}}
    report = summarize([run]) | {"config": {"tool_failure_rate": 0.0, "tool_latency": 0.0}}
    injected, seen = fault_row(report)[:2]
    assert (injected, seen) == ("-", "-")
    assert "no tool faults were injected" in render(report)


def test_injected_tool_faults_show_the_calls_seen() -> None:
    run = failed_run("t", None) | {"calls_made": 3, "faults_injected":
                                   {"tool_calls_seen": 3, "tool_failures": 1}}
    report = summarize([run]) | {"config": {"tool_failure_rate": 0.3, "tool_latency": 0.0}}
    assert fault_row(report)[:2] == ["1", "3"]

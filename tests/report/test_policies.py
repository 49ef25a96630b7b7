"""Each report module names the Content-Security-Policy its page carries, so the inbox sends
as a header exactly what the page itself says."""

from __future__ import annotations

import html
import re
from pathlib import Path

from test_eval_report_links import failed_run, write_trace

from miniagent.evals.metrics import summarize
from miniagent.observe.reader import read_trace
from miniagent.report import evals, trace


def page_policy(page: str) -> str:
    """The policy in the page's ``<meta http-equiv>``."""
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert found, "the page carries no policy"
    return html.unescape(found.group(1))


def test_the_trace_page_carries_the_trace_policy(tmp_path: Path) -> None:
    write_trace(tmp_path / "t.jsonl")
    page = trace.render_trace(read_trace(tmp_path / "t.jsonl"))
    assert page_policy(page) == trace.POLICY
    assert "script-src 'sha256-" in trace.POLICY  # its own script runs, by hash


def test_the_eval_page_carries_the_eval_policy() -> None:
    page = evals.render(summarize([failed_run("t", None)]))
    assert page_policy(page) == evals.POLICY
    assert "script-src 'none'" in evals.POLICY

"""The eval report's links to trace pages: relative, percent-encoded, never lost to a bad file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from miniagent.evals.metrics import summarize
from miniagent.report.evals import write_html


def failed_run(task_id: str, trace: str | None) -> dict[str, Any]:
    """A failed run's record, as the runner writes it."""
    return {"key": f"react/0/{task_id}", "id": task_id, "mode": "react", "repeat": 0,
            "category": "c", "tags": [], "input": "q", "expected": "a", "final_answer": "b",
            "correct": False, "check_note": None, "tool_calls_correct": None,
            "status": "completed", "reason": "r", "steps": 1,
            "tokens": {"prompt": 1, "completion": 1, "cached": 0}, "wall_time": 0.1,
            "calls_made": 0, "invalid_calls": 0, "calls": [], "parse_failures": 0,
            "tool_errors": 0, "met_error": False, "self_repaired": False,
            "faults_injected": {}, "trace": trace}


def write_trace(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"kind": "run_started", "session_id": "s", "span_id": "r",
                                "at": 0, "question": "问题"}) + "\n", encoding="utf-8")


def summaries(html: str) -> dict[str, str]:
    """Each failure's summary line, by its key."""
    return dict(re.findall(r'<details class="failure" id="([^"]+)"><summary>(.*?)</summary>',
                           html))


def test_a_trace_named_like_a_url_is_linked_as_a_relative_path(tmp_path: Path) -> None:
    """The page sits in the traces folder, so the plain relative path of
    ``javascript:alert(1).html`` would be a javascript: URL."""
    out = tmp_path / "o"
    write_trace(out / "traces" / "javascript:alert(1).jsonl")
    page = out / "traces" / "report.html"
    write_html(summarize([failed_run("t", "traces/javascript:alert(1).jsonl")]), page,
               traces_root=out)
    line = summaries(page.read_text(encoding="utf-8"))["react/0/t"]
    assert 'href="javascript%3Aalert%281%29.html"' in line
    assert (out / "traces" / "javascript:alert(1).html").exists()


def test_a_damaged_or_missing_trace_costs_its_link_not_the_report(tmp_path: Path) -> None:
    out = tmp_path / "o"
    (out / "traces").mkdir(parents=True)
    (out / "traces" / "damaged.jsonl").write_text("not a trace\n", encoding="utf-8")
    write_trace(out / "traces" / "good.jsonl")
    page = tmp_path / "report.html"
    runs = [failed_run("damaged", "traces/damaged.jsonl"),
            failed_run("missing", "traces/missing.jsonl"),
            failed_run("notes", "traces/../config.json"), failed_run("good", "traces/good.jsonl")]
    write_html(summarize(runs), page, traces_root=out)
    lines = summaries(page.read_text(encoding="utf-8"))
    assert "trace refused: unreadable (" in lines["react/0/damaged"]
    assert "holds no trace record" in lines["react/0/damaged"]
    assert "no trace" in lines["react/0/missing"] and "href" not in lines["react/0/missing"]
    assert "trace refused: &#x27;traces/../config.json&#x27; is not a .jsonl file" in lines[
        "react/0/notes"]
    assert 'href="o/traces/good.html"' in lines["react/0/good"]

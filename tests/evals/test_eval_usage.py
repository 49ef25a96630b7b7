"""Tokens per task when the server reports none: unknown in the results, left out of the means
(n/a when no run reported), counted as ``unreported``; never 0."""

from __future__ import annotations

import json
from pathlib import Path

from test_eval_cli import TOOLS, miniagent_eval, react_server, tasks_file

from miniagent.evals.metrics import mean_tokens, summarize
from miniagent.testing.stub_server import StubServer


def test_an_eval_against_a_server_without_usage_says_n_a(tmp_path: Path) -> None:
    with StubServer(react_server, report_usage=False).run_in_thread() as stub:
        out = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                             stub.base_url, "--out", str(tmp_path / "o"), "--json",
                             "--html", str(tmp_path / "report.html"))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for result in report["results"]:
        tokens = result["tokens"]
        assert (tokens["prompt"], tokens["completion"], tokens["cached"]) == (None, None, None)
        assert tokens["estimated"] > 0
    assert report["tokens"]["unreported"] == 4
    assert report["tokens"]["prompt"] is None and report["tokens"]["prompt_total"] == 0
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "n/a (4 not reported)" in page
    assert 'data-series="not reported, estimated"' in page


def run(tokens: dict[str, int | None]) -> dict[str, object]:
    return {"id": "t", "mode": "react", "category": "c", "tool_calls_correct": None,
            "calls_made": 0, "invalid_calls": 0, "steps": 1, "parse_failures": 0,
            "met_error": False, "self_repaired": False, "correct": True, "status": "completed",
            "tokens": tokens, "wall_time": 0.1, "tool_errors": 0, "repeat": 0}


def test_the_means_are_of_the_runs_that_reported_tokens() -> None:
    runs = [run({"prompt": 100, "completion": 10, "cached": 40}),
            run({"prompt": 300, "completion": 30, "cached": 0}),
            run({"prompt": None, "completion": None, "cached": None, "estimated": 9999})]
    tokens = summarize(runs)["tokens"]
    assert (tokens["prompt"], tokens["completion"], tokens["cached"]) == (200, 20, 20)
    assert (tokens["prompt_total"], tokens["unreported"]) == (400, 1)
    assert mean_tokens(tokens, "prompt") == "200 (1 not reported)"
    assert mean_tokens(summarize(runs[:2])["tokens"], "completion") == "20"

"""Eval reports in the inbox (``miniagent ui --evals DIR``): the pages ``eval --html`` and
``trace html`` write, by the same code, under the report's CSP; nothing outside DIR is read."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from ui_support import LOCAL

from miniagent import InMemoryStore
from miniagent.evals.metrics import summarize
from miniagent.observe.reader import read_trace
from miniagent.report.evals import write_html
from miniagent.report.html import csp
from miniagent.report.trace import SCRIPT, render_trace
from miniagent.ui import app

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from test_eval_report_links import failed_run, write_trace

BASE = "http://127.0.0.1:8765"
HOSTILE = "</script><img src=x onerror=alert(1)>支付"
TRACE_LINK = re.compile(r'<a class="trace-link" href="([^"]*)">')


def eval_folder(folder: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    report = json.loads(json.dumps(summarize(runs)))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, ensure_ascii=False),
                                        encoding="utf-8")
    return report


@pytest.fixture
def evals(tmp_path: Path) -> Path:
    root = tmp_path / "evals"
    write_trace(root / "run1" / "traces" / "good.jsonl")
    (tmp_path / "secret.jsonl").write_text('{"secret": "do not show"}\n', encoding="utf-8")
    good = failed_run("good", "traces/good.jsonl")
    good["final_answer"] = HOSTILE
    eval_folder(root / "run1", [good, failed_run("out", "../../secret.jsonl"),
                                failed_run("none", None)])
    eval_folder(root / "nested" / "run2", [failed_run("x", None)])
    eval_folder(tmp_path / "elsewhere", [failed_run("y", None)])
    (root / "linked").symlink_to(tmp_path / "elsewhere")  # a link that leads out
    return root


def client(evals: Path | None) -> TestClient:
    return TestClient(app(store=InMemoryStore(), evals=evals), client=LOCAL, base_url=BASE)


def test_reports_are_listed_and_rendered_by_the_eval_html_code(evals: Path,
                                                                 tmp_path: Path) -> None:
    with client(evals) as http:
        listing = http.get("/evals").text
        assert ">run1</a>" in listing and ">nested/run2</a>" in listing
        assert "linked" not in listing
        assert 'href="/evals"' in http.get("/").text  # the header links to it
        page = http.get("/evals/report", params={"run": "run1"})
        links = TRACE_LINK.findall(page.text)
        trace = http.get(links[0].replace("&amp;", "&"))
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == csp() + "; frame-ancestors 'none'"
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(1)&gt;支付" in page.text
    # the very page eval --html writes, but for where its trace links lead
    written = tmp_path / "file" / "report.html"
    write_html(json.loads((evals / "run1" / "report.json").read_text(encoding="utf-8")),
               written, traces_root=evals / "run1")
    assert TRACE_LINK.sub("LINK", page.text) == TRACE_LINK.sub(
        "LINK", written.read_text(encoding="utf-8"))
    assert links == ["/evals/trace?run=run1&amp;key=react%2F0%2Fgood"]
    assert "is outside the output folder" in page.text  # the trace that leads out: refused
    assert trace.status_code == 200
    assert trace.text == render_trace(read_trace(evals / "run1" / "traces" / "good.jsonl"),
                                      back=("/evals/report?run=run1", "← Back to the eval report"))
    assert trace.headers["content-security-policy"] == csp(SCRIPT) + "; frame-ancestors 'none'"


@pytest.mark.parametrize("run", ["../elsewhere", "linked", str(Path("/etc")), "", "run1/..",
                                 "nested"])
def test_no_report_is_read_outside_the_folder(evals: Path, run: str) -> None:
    with client(evals) as http:
        page = http.get("/evals/report", params={"run": run})
        trace = http.get("/evals/trace", params={"run": run, "key": "react/0/y"})
    assert page.status_code == 404 and "There is no eval report" in page.text
    assert trace.status_code == 404
    assert "react/0/y" not in page.text


def test_a_trace_outside_the_folder_is_refused(evals: Path) -> None:
    with client(evals) as http:
        out = http.get("/evals/trace", params={"run": "run1", "key": "react/0/out"})
        none = http.get("/evals/trace", params={"run": "run1", "key": "react/0/none"})
        unknown = http.get("/evals/trace", params={"run": "run1", "key": "../../secret"})
    assert out.status_code == 500 and "is outside the output folder" in out.text
    assert "do not show" not in out.text
    assert out.headers["content-security-policy"].startswith("default-src 'none'")
    assert none.status_code == 404 and unknown.status_code == 404


def test_a_damaged_report_gives_a_clear_page(evals: Path) -> None:
    (evals / "run1" / "report.json").write_text("{not json", encoding="utf-8")
    (evals / "nested" / "run2" / "report.json").write_text('{"results": [{"key": "k"}]}',
                                                           encoding="utf-8")
    with client(evals) as http:
        bad = http.get("/evals/report", params={"run": "run1"})
        odd = http.get("/evals/report", params={"run": "nested/run2"})
    assert bad.status_code == 500 and "run1/report.json cannot be read" in bad.text
    assert odd.status_code == 500 and "not a report this miniagent can show" in odd.text


def test_without_evals_there_is_no_listing() -> None:
    with client(None) as http:
        page = http.get("/evals")
        assert 'href="/evals"' not in http.get("/").text
    assert page.status_code == 404 and "miniagent ui --evals DIR" in page.text

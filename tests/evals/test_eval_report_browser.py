"""The eval report in headless Chromium: renders, has its charts, failure links open traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_eval_cli import TOOLS, miniagent_eval, react_server, tasks_file, user_text

from browser import needs_browser, open_page
from miniagent.testing.stub_server import StubServer

pytestmark = needs_browser

HOSTILE = '</script><img src=x onerror="window.pwned=1">'


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("eval")
    tasks = tasks_file(folder)
    with tasks.open("a", encoding="utf-8") as handle:  # a failing task with hostile text
        handle.write(json.dumps({"id": "evil", "input": f"Echo {HOSTILE}", "category": "x<b>",
                                 "expected": {"answer": "never"}}) + "\n")

    def server(data: dict, n: int) -> str:
        if HOSTILE in user_text(data):
            return f"Thought: ok\nFinal Answer: {HOSTILE}"
        return react_server(data, n)

    with StubServer(server).run_in_thread() as stub:
        out = miniagent_eval(str(tasks), "--tools", TOOLS, "--base-url", stub.base_url,
                             "--mode", "react,native", "--out", str(folder / "o"), "--html",
                             str(folder / "site" / "report.html"))
    assert out.returncode == 0, out.stderr
    return folder / "site" / "report.html"


def test_the_page_renders_with_its_charts(report: Path) -> None:
    with open_page(report) as opened:
        page = opened.page
        assert page.locator("h1").inner_text() == "miniagent eval: 5 tasks, 10 runs"
        assert page.locator(".card").count() == 2
        charts = [c.get_attribute("aria-label") for c in page.locator("svg.chart").all()]
        assert charts == ["Accuracy per category and mode",
                          "Steps per run (histogram: runs with k steps)",
                          "Tokens per task (react, first repeat)",
                          "Tokens per task (native, first repeat)"]
        bar = page.locator('svg.chart rect[data-label="one_tool"][data-series="react"]')
        assert bar.get_attribute("data-value") == "100"
        assert page.locator("details.failure").count() == 7  # 2 in react, 5 in native
        assert page.evaluate("window.pwned") is None
        assert page.locator("img").count() == 0
    assert opened.outside_requests == [] and opened.errors == []


def test_a_failure_expands_and_its_link_opens_the_trace(report: Path) -> None:
    with open_page(report) as opened:
        page = opened.page
        failure = page.locator('details.failure[id="react/0/evil"]')
        failure.locator("summary").click()
        assert failure.get_attribute("open") is not None
        assert HOSTILE in failure.locator("pre").nth(2).inner_text()  # the answer, as text
        link = failure.locator("a.trace-link")
        href = link.get_attribute("href")
        assert href is not None and href.endswith(".html") and not href.startswith("/")
        target = (report.parent / href).resolve()
        assert target.exists()
        assert link.evaluate("a => a.href") == target.as_uri()
        # the helper lets a page load only its own file: the navigation is asked for, recorded
        with page.expect_request(lambda request: request.url == target.as_uri()):
            link.click()
    assert opened.outside_requests == [target.as_uri()]
    with open_page(target) as trace:  # ... and the page it asked for is the run's trace
        assert trace.page.locator("h1").inner_text().startswith("Trace: Echo")
        assert trace.page.locator("details.step").count() == 1
        assert trace.page.evaluate("window.pwned") is None

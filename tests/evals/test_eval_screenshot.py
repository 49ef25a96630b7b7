"""The eval report's picture on the docs' evaluation page: the tests' task set in react and
native against the stub server, with 20% tool faults, rendered in headless Chromium (written
into docs/images/generated/)."""

from __future__ import annotations

from pathlib import Path

from test_eval_cli import TOOLS, miniagent_eval, react_server, tasks_file

from browser import needs_browser, open_page, screenshot_path
from miniagent.testing.stub_server import StubServer

pytestmark = needs_browser


def test_the_docs_eval_picture(tmp_path: Path) -> None:
    report = tmp_path / "eval.html"
    with StubServer(react_server).run_in_thread() as stub:
        out = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                             stub.base_url, "--mode", "react,native", "--seed", "7",
                             "--tool-failure-rate", "0.2", "--out", str(tmp_path / "o"),
                             "--html", str(report))
    assert out.returncode == 0, out.stderr
    with open_page(report, width=1200, height=900) as opened:
        assert opened.page.locator("svg.chart").count() >= 2  # the charts the page describes
        opened.page.screenshot(path=str(screenshot_path("eval-report.png")), full_page=True)
    assert opened.outside_requests == [] and opened.errors == []

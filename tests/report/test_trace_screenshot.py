"""The trace report's pictures on the docs' traces page: the real run of the embedded
SmolLM2-135M kept in docs/trace-smollm2.jsonl, rendered and photographed in headless Chromium
(written into docs/images/generated/)."""

from __future__ import annotations

from pathlib import Path

from browser import needs_browser, open_page, screenshot_path
from miniagent.report.trace import write_trace_html

pytestmark = needs_browser

TRACE = Path(__file__).resolve().parents[2] / "docs" / "trace-smollm2.jsonl"


def test_the_docs_trace_pictures(tmp_path: Path) -> None:
    report = tmp_path / "trace.html"
    write_trace_html(TRACE, report)
    with open_page(report, width=1200, height=900) as opened:
        page = opened.page
        assert page.locator("details.step").count() == 3  # the run the page describes
        page.screenshot(path=str(screenshot_path("trace-report.png")))
        first = page.locator("details.step").first
        first.locator("> summary").click()
        assert first.locator("pre.raw-output").is_visible()
        first.screenshot(path=str(screenshot_path("trace-step.png")))
    assert opened.outside_requests == [] and opened.errors == []
    assert screenshot_path("trace-step.png").stat().st_size > 0

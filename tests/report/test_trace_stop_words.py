"""The trace report shows a request's stop words so that any font can draw them (issue 36:
the full-width colon of ``\\nObservation：`` was a box where no CJK font is installed)."""

from __future__ import annotations

from pathlib import Path

from browser import needs_browser, open_page
from miniagent import Agent, OpenAICompatibleModel
from miniagent.core.protocol.react import STOP_WORDS
from miniagent.report.trace import write_trace_html
from miniagent.testing.stub_server import StubServer

pytestmark = needs_browser


def test_a_full_width_stop_word_is_written_as_its_escape(tmp_path: Path) -> None:
    assert "\nObservation\uff1a" in STOP_WORDS  # what the request below sends
    trace = tmp_path / "run.jsonl"
    with StubServer(["Thought: easy\nFinal Answer: 4"]).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="react")
        assert Agent(model=model, trace=trace).run("2+2?").status == "completed"
    out = tmp_path / "report.html"
    write_trace_html(trace, out)
    with open_page(out) as opened:
        opened.page.locator("details.step").first.evaluate("d => d.open = true")
        text = opened.page.locator("body").inner_text()
        assert "\uff1a" not in text
        settings = opened.page.locator("p.request-settings").first.inner_text()
    assert '"\\nObservation:"' in settings and '"\\nObservation\\uff1a"' in settings, settings
    assert opened.errors == [] and opened.outside_requests == []

"""The trace report in headless Chromium: it renders, lists the steps, expands, stays offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser import needs_browser, open_page
from miniagent import Agent, OpenAICompatibleModel, tool
from miniagent.report.trace import write_trace_html
from miniagent.testing.stub_server import StubServer

pytestmark = needs_browser

HOSTILE = "</script><script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">"


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return f"12°C, cloudy {HOSTILE}"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    script = [
        'Thought: look it up\nAction: weather\nAction Input: {"city": "Beijing"}',
        "I am not following the format " + HOSTILE,
        "Thought: done\nFinal Answer: 12°C, cloudy",
    ]
    trace = folder / "run.jsonl"
    with StubServer(script, usage={"prompt_tokens": 300, "completion_tokens": 20,
                                   "cached_tokens": 200}).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="stub-model",
                                      tool_mode="react")
        result = Agent(model=model, tools=[weather], trace=trace).run("Weather in Beijing?")
    assert result.status == "completed"
    out = folder / "report.html"
    write_trace_html(trace, out)
    return out


def test_the_page_renders_and_lists_the_steps(report: Path) -> None:
    with open_page(report) as opened:
        page = opened.page
        assert page.title() == "Trace: Weather in Beijing?"
        assert page.locator("h1").inner_text() == "Trace: Weather in Beijing?"
        steps = page.locator("ol.timeline > li > details.step")
        assert steps.count() == 3
        summaries = [s.inner_text() for s in page.locator("details.step > summary").all()]
        assert summaries[0].startswith("step 1") and "weather" in summaries[0]
        assert "invalid" in summaries[1] and "Final Answer: 12°C, cloudy" in summaries[2]
        bars = page.locator("svg.chart rect")
        assert bars.count() == 9  # 3 steps x (cached, not cached, completion)
        assert page.locator('svg.chart rect[data-series="completion"]').first.get_attribute(
            "data-value") == "20"
        assert page.evaluate("window.pwned === undefined")  # no hostile script ran
        assert page.locator("img").count() == 0
    assert opened.outside_requests == [] and opened.errors == []


def test_a_step_expands_to_its_prompt_and_raw_output(report: Path) -> None:
    with open_page(report) as opened:
        page = opened.page
        first = page.locator("details.step").first
        prompt = first.locator("pre.prompt").last
        assert not prompt.is_visible()
        first.locator("> summary").click()
        assert prompt.is_visible() and prompt.inner_text() == "Weather in Beijing?"
        raw = first.locator("pre.raw-output")
        assert raw.inner_text().startswith("Thought: look it up\nAction: weather")
        observation = first.locator("pre.observation")
        assert observation.inner_text() == f"12°C, cloudy {HOSTILE}"  # shown as text
        page.get_by_role("button", name="Expand all").click()
        assert all(d.get_attribute("open") is not None
                   for d in page.locator("details.step").all())
    assert opened.outside_requests == [] and opened.errors == []


def test_an_anchor_opens_its_step(report: Path) -> None:
    with open_page(report) as opened:
        page = opened.page
        page.goto(report.resolve().as_uri() + "#run-1-step-2")
        step2 = page.locator("#run-1-step-2")
        assert step2.get_attribute("open") is not None
        assert page.locator("#run-1-step-1").get_attribute("open") is None
        assert "I am not following the format" in step2.locator("pre.raw-output").inner_text()
    assert opened.errors == []


def test_the_policy_blocks_what_escaping_missed(tmp_path: Path) -> None:
    """With the page's own CSP in force, even an injected external image is never fetched."""
    from miniagent.report.html import page as shell

    path = tmp_path / "p.html"
    path.write_text(shell("t", '<img src="http://127.0.0.1:9/x.png">'), encoding="utf-8")
    with open_page(path, bypass_csp=False) as opened:
        assert opened.page.locator("img").count() == 1
    assert opened.outside_requests == []
    assert any("Content Security Policy" in e for e in opened.errors)


def test_with_its_policy_in_force_the_pages_script_runs(report: Path) -> None:
    """The page's CSP allows its own script (by hash): the buttons and anchors work, and the
    console shows no policy violation."""
    with open_page(report, bypass_csp=False) as opened:
        page = opened.page
        page.get_by_role("button", name="Expand all").click()
        assert all(d.get_attribute("open") is not None
                   for d in page.locator("details.step").all())
        page.get_by_role("button", name="Collapse all").click()
        assert page.locator("details.step[open]").count() == 0
        page.goto(report.resolve().as_uri() + "#run-1-step-3")
        assert page.locator("#run-1-step-3").get_attribute("open") is not None
    assert opened.errors == [] and opened.outside_requests == []


def test_the_policy_runs_no_script_that_escaping_missed(tmp_path: Path) -> None:
    """Markup that slipped through unescaped runs nothing: no inline script, no handler, no
    javascript: link; the report's own script still runs."""
    from miniagent.report.html import page as shell

    injected = ('<script>window.pwned = 1</script><svg><rect onmouseover="window.pwned = 2" '
                'width="500" height="500"/></svg>'
                '<a id="js" href="javascript:window.pwned = 3">x</a>')
    path = tmp_path / "p.html"
    path.write_text(shell("t", injected, script="document.body.dataset.ran = 'yes';"),
                    encoding="utf-8")
    with open_page(path, bypass_csp=False) as opened:
        page = opened.page
        page.mouse.move(100, 100)
        page.locator("#js").click()
        assert page.evaluate("window.pwned") is None
        assert page.locator("body").get_attribute("data-ran") == "yes"
    assert opened.errors and all("Content Security Policy" in e for e in opened.errors)

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


def test_trace_paths_outside_the_output_folder_are_refused(tmp_path: Path) -> None:
    """``results.jsonl`` is edited to point failed runs' traces elsewhere: at a file outside
    the folder (absolute, by ``..``, by a symbolic link) and at a ``javascript:`` name. The
    report reads and writes nothing there, links none of them and says each was refused;
    the one trace left alone still links to its page. The page runs under its own CSP."""
    out, elsewhere = tmp_path / "o", tmp_path / "elsewhere"
    args = [str(tasks_file(tmp_path)), "--tools", TOOLS, "--mode", "react,native", "--out",
            str(out), "--html", str(out / "report.html")]
    with StubServer(lambda data, n: "Thought: no\nFinal Answer: nope").run_in_thread() as stub:
        first = miniagent_eval(*args, "--base-url", stub.base_url)
        assert first.returncode == 0, first.stderr
        records = [json.loads(line) for line in
                   (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
        real = out / records[0]["trace"]
        elsewhere.mkdir()
        (elsewhere / "data.jsonl").write_bytes(real.read_bytes())
        scheme = out / "javascript:window.pwned=1"
        scheme.mkdir()
        (scheme / "self.jsonl").write_bytes(real.read_bytes())
        (out / "traces" / "link.jsonl").symlink_to(elsewhere / "data.jsonl")
        hostile = [str(elsewhere / "data.jsonl"), "../elsewhere/data.jsonl",
                   "javascript:window.pwned=1/self.jsonl", "traces/link.jsonl",
                   "traces/../../elsewhere/data.jsonl", "https://127.0.0.1:9/x.jsonl", 7]
        for record, trace in zip(records[1:], hostile, strict=False):
            record["trace"] = trace
        (out / "results.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for page in out.rglob("*.html"):
            page.unlink()
        again = miniagent_eval(*args, "--base-url", stub.base_url)  # resumes: nothing to run
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["data.jsonl"]  # nothing written
    assert not (scheme / "self.html").exists()
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count("trace refused: ") == len(hostile)
    assert "is outside the output folder" in html and "is not a path inside" in html
    with open_page(out / "report.html", bypass_csp=False) as opened:
        page = opened.page
        hrefs = page.locator("a").evaluate_all("links => links.map(a => a.href)")
        assert hrefs == [real.with_suffix(".html").as_uri()]  # only the trace left alone
        assert page.locator(".trace-refused").count() == len(hostile)
        assert page.evaluate("window.pwned") is None
    assert opened.errors == [] and opened.outside_requests == []
    assert real.with_suffix(".html").exists()

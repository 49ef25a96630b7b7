"""The eval report's layout in headless Chromium at 1200 px: its tables fit the page, and a
run's status badge has the colour of the status, not of the failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_eval_report_links import failed_run

from browser import needs_browser, open_page
from miniagent.evals.metrics import summarize
from miniagent.report.evals import write_html

pytestmark = needs_browser

MODES = ("react", "native", "auto")
STATUSES = ("completed", "max_steps", "loop_detected", "awaiting_approval", "error")


def run(mode: str, repeat: int, n: int) -> dict[str, Any]:
    """A run of a big eval: long status names, five-digit token counts, two repeats."""
    record = failed_run(f"task-{n}", None)
    record.update(key=f"{mode}/{repeat}/task-{n}", mode=mode, repeat=repeat,
                  category=f"category-{n % 4}", status=STATUSES[n % len(STATUSES)],
                  correct=n % 3 == 0, steps=n % 9, wall_time=12.345 * n,
                  tokens={"prompt": 123456 + n, "completion": 23456, "cached": 98765},
                  parse_failures=n % 2, met_error=n % 2 == 1, self_repaired=n % 4 == 1)
    return record


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    page = tmp_path_factory.mktemp("layout") / "report.html"
    runs = [run(mode, repeat, n) for mode in MODES for repeat in (0, 1) for n in range(25)]
    write_html(summarize(runs), page, traces_root=None)
    return page


def test_every_table_fits_the_page_at_1200_px(report: Path) -> None:
    with open_page(report, width=1200) as opened:
        widths = opened.page.evaluate("""() => [...document.querySelectorAll('table')].map(t => {
            const box = getComputedStyle(t.parentElement);
            const room = t.parentElement.clientWidth - parseFloat(box.paddingLeft)
                - parseFloat(box.paddingRight);
            return [t.querySelector('th').textContent, t.scrollWidth, room];
        })""")
        page_width = opened.page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        metrics = opened.page.locator("table").first
        header = metrics.locator("th").all_inner_texts()
        runs = metrics.locator("tr", has_text="runs").locator("td").all_inner_texts()
    assert header == ["metric", *MODES]  # a column per mode, a row per metric: it stays narrow
    assert runs == ["runs", "50", "50", "50"]
    assert len(widths) >= 2
    assert [(name, width, room) for name, width, room in widths if width > room] == []
    assert page_width[0] <= page_width[1]  # no sideways scrolling


def test_a_completed_runs_badge_is_not_the_failure_colour(report: Path) -> None:
    with open_page(report) as opened:
        colours = opened.page.evaluate("""() => {
            const probe = document.body.appendChild(document.createElement('span'));
            probe.className = 'tag bad';  // what the page's failure colour computes to
            const bad = getComputedStyle(probe).borderColor;
            const byStatus = {};
            const statuses = 'details.failure summary .tag:not(.verdict)';
            for (const b of document.querySelectorAll(statuses)) {
                byStatus[b.textContent] = getComputedStyle(b).borderColor;
            }
            return {bad, byStatus};
        }""")
    by_status = colours["byStatus"]
    assert set(by_status) == set(STATUSES)
    assert by_status["completed"] != colours["bad"]
    assert by_status["error"] == colours["bad"]


def test_a_failed_run_says_wrong_answer_and_its_completed_badge_is_not_green(
        tmp_path: Path) -> None:
    """Under "Failures", a run that completed with a wrong answer reads as a failure: a
    "wrong answer" badge in the failure colour, and its status neither red nor green."""
    page = tmp_path / "report.html"
    write_html(summarize([failed_run("t", None)]), page, traces_root=None)
    with open_page(page) as opened:
        seen = opened.page.evaluate("""() => {
            const colour = cls => {
                const probe = document.body.appendChild(document.createElement('span'));
                probe.className = cls;
                return getComputedStyle(probe).borderColor;
            };
            const badges = [...document.querySelectorAll('details.failure summary .tag')];
            return {ok: colour('tag ok'), bad: colour('tag bad'),
                    badges: badges.map(b => [b.textContent, getComputedStyle(b).borderColor])};
        }""")
    badges = dict(seen["badges"])
    assert badges["wrong answer"] == seen["bad"]
    assert badges["completed"] not in (seen["ok"], seen["bad"])

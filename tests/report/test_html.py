"""The shared report pieces: everything escaped, the chart shows its values, a strict CSP."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from miniagent.report.html import BarSeries, bar_chart, csp, details, esc, page, pre, table

HOSTILE = '</script><img src=x onerror="alert(1)">&\'"'


def test_hostile_text_is_inert_everywhere() -> None:
    body = (details(esc(HOSTILE), pre(HOSTILE)) + table([HOSTILE], [[HOSTILE]])
            + bar_chart([HOSTILE], [BarSeries(name=HOSTILE, values=[1])], title=HOSTILE))
    html = page(HOSTILE, body)
    assert "<img" not in html and "</script>" not in html
    assert html.count("&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") >= 5


def test_page_is_self_contained() -> None:
    script = "document.title = 'ok';"
    html = page("t", "<p>x</p>", script=script)
    assert f'content="{csp(script)}"' in html and "default-src 'none'" in csp(script)
    assert not re.search(r"(src|href)=\"(https?:)?//", html)


def policy(html: str) -> dict[str, str]:
    """The directives of the page's Content-Security-Policy meta, by name."""
    content = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert content is not None
    return {d.split()[0]: d.partition(" ")[2] for d in content.group(1).split("; ")}


def test_the_policy_runs_the_reports_own_script_only() -> None:
    script = "document.title = '报告';"
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    directives = policy(page("t", "<p>x</p>", script=script))
    assert directives["script-src"] == f"'sha256-{digest}'"  # no 'unsafe-inline'
    assert directives["default-src"] == "'none'"
    assert policy(page("t", "<p>x</p>"))["script-src"] == "'none'"  # no script, none runs


def test_the_reports_own_code_cannot_close_its_element() -> None:
    with pytest.raises(ValueError):
        page("t", "", script="x = '</script>'")


def test_stacked_chart_bars_carry_their_values() -> None:
    svg = bar_chart(["1", "2"], [BarSeries(name="prompt", values=[30, 10]),
                                 BarSeries(name="completion", values=[5, 0], color="red")],
                    title="tokens per step")
    values = re.findall(r'data-label="(\d)" data-series="(\w+)" data-value="([\d.]+)"', svg)
    assert values == [("1", "prompt", "30"), ("1", "completion", "5"), ("2", "prompt", "10"),
                      ("2", "completion", "0")]
    heights = [float(h) for h in re.findall(r'height="([\d.]+)" fill', svg)]
    assert heights[0] == pytest.approx(6 * heights[1], rel=0.01)  # 30 vs 5: drawn to scale

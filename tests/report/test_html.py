"""The shared report pieces: everything escaped, the chart shows its values, a strict CSP."""

from __future__ import annotations

import re

import pytest

from miniagent.report.html import CSP, BarSeries, bar_chart, details, esc, page, pre, table

HOSTILE = '</script><img src=x onerror="alert(1)">&\'"'


def test_hostile_text_is_inert_everywhere() -> None:
    body = (details(esc(HOSTILE), pre(HOSTILE)) + table([HOSTILE], [[HOSTILE]])
            + bar_chart([HOSTILE], [BarSeries(name=HOSTILE, values=[1])], title=HOSTILE))
    html = page(HOSTILE, body)
    assert "<img" not in html and "</script>" not in html
    assert html.count("&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") >= 5


def test_page_is_self_contained() -> None:
    html = page("t", "<p>x</p>", script="document.title = 'ok';")
    assert f'content="{CSP}"' in html and "default-src 'none'" in CSP
    assert not re.search(r"(src|href)=\"(https?:)?//", html)


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

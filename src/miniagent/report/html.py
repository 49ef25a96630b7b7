"""The shared pieces of miniagent's HTML reports: escaping, a page shell, an SVG bar chart.

Reports are single self-contained files: CSS and script inline, charts as inline SVG, no
network asset, and a Content-Security-Policy (:func:`csp`) that forbids loading anything from
anywhere and runs no script but the report's own (allowed by its hash), so a page opened from
a mail or a CI artifact makes no request and runs nothing even if some text slipped through
unescaped: no injected ``<script>``, ``onerror=`` or ``javascript:`` link. Everything a model,
a tool or a person wrote is hostile (``</script>``, ``<img onerror=...>``): build pages only
from :func:`esc` and the helpers here, which escape what they are given.

Example:
    >>> body = details(esc("step 1"), pre("<img src=x onerror=alert(1)>"))
    >>> "<img" in body
    False
    >>> page("Report", body).startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BarSeries", "bar_chart", "csp", "details", "esc", "nice_ceiling", "page", "pre",
           "status_class", "table"]


def csp(script: str = "") -> str:
    """The Content-Security-Policy of a page whose one inline script is ``script``.

    Scripts: only that one, by its SHA-256 hash (none when it is empty), never
    ``'unsafe-inline'``, which would also run an injected ``<script>``, an ``on...=`` handler
    or a ``javascript:`` link. Styles stay inline (the charts' bars are placed by ``style``
    attributes, which a hash cannot allow); no fetch, image, font or frame from anywhere.

    Example:
        >>> csp("")
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'none'; img-src data:; \
base-uri 'none'; form-action 'none'"
    """
    if script:
        digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
        scripts = f"'sha256-{digest}'"
    else:
        scripts = "'none'"
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src {scripts}; "
            "img-src data:; base-uri 'none'; form-action 'none'")

BASE_CSS = """
:root { --fg: #1d2330; --muted: #5f6b7a; --line: #d8dde5; --bg: #ffffff; --panel: #f5f7fa;
  --accent: #2f6fde; --ok: #1f8a4c; --bad: #c2352b; --warn: #b7791f;
  --s1: #2f6fde; --s2: #9bb8ef; --s3: #f0a43a; --s4: #8a63d2; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC",
  sans-serif; color: var(--fg); background: var(--bg); margin: 0 auto; max-width: 1100px;
  padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 24px 0 8px; }
h3 { font-size: 14px; margin: 12px 0 4px; }
.muted { color: var(--muted); } .ok { color: var(--ok); } .bad { color: var(--bad); }
.warn { color: var(--warn); }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  padding: 8px 10px; white-space: pre-wrap; word-break: break-word; margin: 4px 0;
  font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  max-height: 480px; overflow: auto; }
details { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; background: #fff; }
details > summary { cursor: pointer; padding: 6px 10px; list-style-position: inside; }
details[open] > summary { border-bottom: 1px solid var(--line); background: var(--panel); }
details > .body { padding: 6px 12px 10px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left;
  vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart { display: block; max-width: 100%; height: auto; }
.chart text { font: 11px system-ui, sans-serif; fill: var(--muted); }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px;
  vertical-align: -1px; border-radius: 2px; }
.tag { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px;
  background: var(--panel); border: 1px solid var(--line); }
.tag.ok { border-color: var(--ok); } .tag.bad { border-color: var(--bad); }
.tag.warn { border-color: var(--warn); }
"""


def esc(value: object) -> str:
    """``value`` as text safe anywhere in HTML: content and quoted attribute values."""
    return html.escape(str(value), quote=True)


def status_class(status: str) -> str:
    """The badge class of a run's status: ``ok`` for completed (in a list of failed runs too:
    the run ended well, its answer was wrong), ``warn`` while it waits, ``bad`` otherwise."""
    return "ok" if status == "completed" else "warn" if status == "awaiting_approval" else "bad"


def pre(text: str, *, cls: str = "") -> str:
    """A ``<pre>`` block holding ``text`` (escaped)."""
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<pre{attr}>{esc(text)}</pre>"


def details(summary_html: str, body_html: str, *, open_: bool = False, cls: str = "",
            attrs: str = "") -> str:
    """An expandable block; ``summary_html`` and ``body_html`` must already be safe HTML."""
    classes = f' class="{esc(cls)}"' if cls else ""
    opened = " open" if open_ else ""
    extra = f" {attrs}" if attrs else ""
    return (f"<details{classes}{opened}{extra}><summary>{summary_html}</summary>"
            f'<div class="body">{body_html}</div></details>')


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *,
          numeric: Sequence[int] = ()) -> str:
    """A table of escaped cells; columns listed in ``numeric`` are right-aligned."""
    def cell(tag: str, index: int, value: object) -> str:
        cls = ' class="num"' if index in numeric else ""
        return f"<{tag}{cls}>{esc(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass(frozen=True, kw_only=True)
class BarSeries:
    """One series of a bar chart: a name for the legend, one value per label, a colour."""

    name: str
    values: Sequence[float]
    color: str = "var(--s1)"


def bar_chart(labels: Sequence[str], series: Sequence[BarSeries], *, title: str,
              stacked: bool = True, height: int = 220, unit: str = "") -> str:
    """An inline SVG bar chart (stacked or side by side), with a legend and a title.

    Each bar carries a ``<title>`` (its exact value, shown on hover) and ``data-label`` /
    ``data-value`` attributes, so tests and scripts can read what it shows.
    """
    groups = max(len(labels), 1)
    left, bottom, top, slot = 48, 28, 12, max(18, min(64, 720 // groups))
    width = left + slot * groups + 12
    totals = [sum(s.values[i] for s in series) if stacked else
              max((s.values[i] for s in series), default=0) for i in range(len(labels))]
    peak = nice_ceiling(max([*totals, 1]))
    scale = (height - bottom - top) / peak
    parts = [_axis(left, top, height - bottom, width, peak, unit)]
    for i, label in enumerate(labels):
        x0 = left + i * slot + 3
        bar_w = (slot - 6) if stacked else max(2, (slot - 6) // max(len(series), 1))
        base = 0.0
        for n, s in enumerate(series):
            value = float(s.values[i])
            h = value * scale
            x = x0 if stacked else x0 + n * bar_w
            y = height - bottom - (base + h if stacked else h)
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{esc(s.color)}" data-label="{esc(label)}" data-series="{esc(s.name)}" '
                f'data-value="{value:g}"><title>{esc(label)} · {esc(s.name)}: '
                f"{value:,.6g}{esc(unit)}</title></rect>")
            if stacked:
                base += h
        parts.append(f'<text x="{x0 + (slot - 6) / 2:.1f}" y="{height - bottom + 14}" '
                     f'text-anchor="middle">{esc(label)}</text>')
    legend = "".join(f'<span><i style="background:{esc(s.color)}"></i>{esc(s.name)}</span>'
                     for s in series)
    return (f'<figure class="chart-box"><figcaption><strong>{esc(title)}</strong> '
            f'<span class="legend">{legend}</span></figcaption>'
            f'<svg class="chart" role="img" aria-label="{esc(title)}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg></figure>')


def nice_ceiling(value: float) -> float:
    """The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten)
    that is at least ``value``: the top of a chart's axis, whose quarters then read well.

    Example:
        >>> nice_ceiling(1138), nice_ceiling(7), nice_ceiling(0.3)
        (1200.0, 8.0, 0.3)
    """
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for factor in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if value <= factor * power * (1 + 1e-9):
            return round(factor * power, 12)
    return 10 * power


def _axis(left: int, top: int, base: int, width: int, peak: float, unit: str) -> str:
    lines = []
    for k in range(5):
        value = peak * k / 4
        y = base - (base - top) * k / 4
        lines.append(f'<line x1="{left}" x2="{width - 6}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="#e3e7ee"/><text x="{left - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{value:,.4g}{esc(unit)}</text>')
    return "".join(lines)


def page(title: str, body_html: str, *, style: str = "", script: str = "") -> str:
    """A whole HTML document: ``body_html`` (already safe) in the shared shell.

    ``style`` and ``script`` are the report's own CSS and JavaScript, written by miniagent,
    never data: put data in escaped HTML (attributes, text) and let the script read the DOM.
    """
    for name, code in (("style", style), ("script", script)):
        if f"</{name}" in code.lower():
            raise ValueError(f"the report's own {name} must not close its element")
    script_tag = f"<script>{script}</script>" if script else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp(script)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{BASE_CSS}{style}</style></head>"
            f"<body>{body_html}{script_tag}</body></html>\n")

"""The eval report as one self-contained HTML page (``miniagent eval ... --html FILE``).

Built from the shared report pieces (:mod:`miniagent.report.html`): a table of the metrics per
mode, charts (accuracy per category and mode, the steps histogram, tokens per task), faults
injected beside faults met, the changes against an earlier report when there is one, and every
failed run with its answer, status and a link to its trace.

Rendering (:func:`render`) writes nothing: it asks a :data:`TraceLink` for each failed run's
link. :func:`write_html` first writes each linked trace as its own HTML page next to its JSONL
file, then the report with relative links to them; the browser inbox serves the same pages
from its own routes (:mod:`miniagent.ui.evals`, :mod:`miniagent.ui.report_pages`).

A result's ``trace`` comes from ``results.jsonl``, which anyone who can write the folder may
have edited: it is used only as a ``.jsonl`` file inside the output folder (symbolic links
resolved), so the report reads and writes nothing elsewhere and links to nothing but a page
it wrote there; any other trace is shown as refused, with the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from miniagent._internal.files import private_dir, write_private
from miniagent._internal.wording import counted
from miniagent.core.errors import UserError
from miniagent.evals.metrics import mean_tokens
from miniagent.report.html import (
    BarSeries,
    bar_chart,
    csp,
    details,
    esc,
    page,
    pre,
    status_class,
    table,
)
from miniagent.report.trace import write_trace_html

POLICY = csp()
"""The Content-Security-Policy of an eval report page: no script at all."""

COLORS = ("var(--s1)", "var(--s3)", "var(--s4)", "var(--s2)")

STYLE = """
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 150px; }
.card b { display: block; font-size: 22px; }
.failure > summary .id { font-weight: 600; margin-right: 8px; }
.metrics td:first-child { white-space: nowrap; }
"""


TraceLink = Callable[[dict[str, Any]], "str | None"]
"""The link of a result's trace page (None: no trace); raises :class:`TraceRefused` to show
why there is none."""


class TraceRefused(Exception):
    """A result's trace that the report does not use, and why."""


def write_html(report: dict[str, Any], path: Path, *, traces_root: Path | None = None) -> None:
    """Write the page for ``report`` to ``path`` and, next to each failed run's JSONL trace
    inside ``traces_root``, its trace page; the report links to them relatively."""
    private_dir(path.parent)
    links = _write_trace_pages(report, path.parent, traces_root) if traces_root else {}
    write_private(path, render(report, trace_link=_looked_up(links)))


def no_trace_links(_result: dict[str, Any]) -> None:
    """A :data:`TraceLink` for a report shown without its traces."""
    return None


def render(report: dict[str, Any], *, trace_link: TraceLink = no_trace_links) -> str:
    """The report's page; writes nothing (``trace_link`` gives each failed run's link)."""
    modes = report["modes"]
    body = [f"<h1>miniagent eval: {esc(counted(report['tasks'], 'task'))}, "
            f"{esc(counted(report['runs'], 'run'))}</h1>",
            f'<p class="muted">modes: {esc(", ".join(modes))}; '
            f"{esc(_config_line(report.get('config') or {}))}</p>",
            _cards(report), "<h2>Metrics per mode</h2>", _metrics_table(report),
            "<h2>Charts</h2>", _accuracy_chart(report), _steps_chart(report),
            *(_tokens_chart(report, mode) for mode in modes),
            "<h2>Faults: injected and met</h2>", _faults_table(report)]
    if report.get("compare"):
        body += ["<h2>Changes against the earlier report</h2>", _compare(report["compare"])]
    body += [_failures(report, trace_link)]
    return page("miniagent eval report", "".join(body), style=STYLE)


def failed(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The results the report lists as failures (with a trace link each)."""
    return [r for r in report["results"] if not r["correct"]]


def _config_line(config: dict[str, Any]) -> str:
    keys = ("model", "base_url", "model_path", "max_steps", "seed", "tool_failure_rate",
            "tool_latency", "model_failure_rate", "repeat")
    return "; ".join(f"{k}={config[k]}" for k in keys if config.get(k) not in (None, "", 0))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _cards(report: dict[str, Any]) -> str:
    cards = []
    for mode in report["modes"]:
        group = report["by_mode"][mode]
        cards.append(f'<div class="card" data-mode="{esc(mode)}">{esc(mode)} accuracy'
                     f"<b>{esc(_pct(group['accuracy']))}</b>"
                     f"tool calls {esc(_pct(group['tool_call_accuracy']))}</div>")
    return f'<div class="cards">{"".join(cards)}</div>'


def _metrics_table(report: dict[str, Any]) -> str:
    """One row per metric, one column per mode: 14 metrics side by side would not fit a page."""
    def values(g: dict[str, Any]) -> list[object]:
        spread = g["spread"]
        return [
            g["n"], _pct(g["accuracy"]), _pct(g["tool_call_accuracy"]),
            _pct(g["call_validity"]), g["steps"]["mean"], _pct(g["parse_failure_rate"]),
            f"{_pct(g['self_repair_rate'])} of {g['met_error_n']}",
            *(mean_tokens(g["tokens"], kind) for kind in ("prompt", "completion", "cached")),
            g["wall_time"]["mean"],
            " ".join(f"{k}:{v}" for k, v in g["statuses"].items()),
            "-" if not spread else f"{_pct(spread['min'])}..{_pct(spread['max'])}",
        ]

    metrics = ["runs", "accuracy", "tool-call accuracy", "call validity", "steps (mean)",
               "parse failures / reply", "self-repair", "prompt tokens / task",
               "completion tokens / task", "cached tokens / task", "wall s / task", "statuses",
               "accuracy spread"]
    modes = report["modes"]
    columns = [values(report["by_mode"][mode]) for mode in modes]
    rows = [[name, *(column[i] for column in columns)] for i, name in enumerate(metrics)]
    return ('<div class="metrics">'
            + table(["metric", *modes], rows, numeric=range(1, len(modes) + 1)) + "</div>")


def _accuracy_chart(report: dict[str, Any]) -> str:
    categories = sorted({r["category"] for r in report["results"]})
    series = [BarSeries(name=mode, color=COLORS[n % len(COLORS)], values=[
        100 * (report["by_mode"][mode]["by_category"].get(c, {}).get("accuracy") or 0)
        for c in categories]) for n, mode in enumerate(report["modes"])]
    return bar_chart(categories, series, title="Accuracy per category and mode", stacked=False,
                     unit="%")


def _steps_chart(report: dict[str, Any]) -> str:
    most = max([r["steps"] for r in report["results"]] + [1])
    labels = [str(k) for k in range(0, most + 1)]
    series = [BarSeries(name=mode, color=COLORS[n % len(COLORS)], values=[
        report["by_mode"][mode]["steps"]["distribution"].get(k, 0) for k in labels])
        for n, mode in enumerate(report["modes"])]
    return bar_chart(labels, series, title="Steps per run (histogram: runs with k steps)",
                     stacked=False)


def _tokens_chart(report: dict[str, Any], mode: str) -> str:
    runs = [r for r in report["results"] if r["mode"] == mode and r["repeat"] == 0]
    labels = [str(n) for n in range(1, len(runs) + 1)]  # ids overlap: numbers, listed below
    tokens = [r["tokens"] for r in runs]
    series = [BarSeries(name="prompt", color="var(--s1)",
                        values=[t["prompt"] or 0 for t in tokens]),
              BarSeries(name="completion", color="var(--s3)",
                        values=[t["completion"] or 0 for t in tokens])]
    if any(t["prompt"] is None for t in tokens):
        series.append(BarSeries(name="not reported, estimated", color="var(--s4)",
                                values=[t.get("estimated") or 0 for t in tokens]))
    chart = bar_chart(labels, series, title=f"Tokens per task ({mode}, first repeat)",
                      stacked=True)
    legend = ", ".join(f"{n}: {r['id']}" for n, r in enumerate(runs, 1))
    return chart + f'<p class="muted kv">{esc(legend)}</p>'



def _faults_table(report: dict[str, Any]) -> str:
    rows = []
    model_faults = report.get("model_faults") or {}
    tool_faults = _tool_faults_on(report)
    for mode in report["modes"]:
        f = report["by_mode"][mode]["faults"]
        injected_model = model_faults.get(mode, {}).get("injected", {})
        # the calls are counted where faults are injected: with none, no count was made
        injected_tool = [f["injected"]["tool_failures"], f["injected"]["tool_calls_seen"]] if (
            tool_faults) else ["-", "-"]
        rows.append([mode, *injected_tool,
                     sum(injected_model.values()),
                     " ".join(f"{k}:{v}" for k, v in sorted(injected_model.items())) or "-",
                     f["met"]["tool_errors"], f["met"]["parse_failures"],
                     f["met"]["model_errors"], f["met"]["runs_with_errors"]])
    headers = ["mode", "injected: tool failures", "tool calls seen",
               "injected: model faults", "model faults by kind", "met: tool errors",
               "met: parse failures", "met: runs ended by a model error", "runs that met errors"]
    note = "" if tool_faults else (
        '<p class="muted">no tool faults were injected (--tool-failure-rate and '
        "--tool-latency were 0): the tool columns count nothing</p>")
    return table(headers, rows, numeric=(1, 2, 3, 5, 6, 7, 8)) + note


def _tool_faults_on(report: dict[str, Any]) -> bool:
    """Whether the eval injected tool faults: as its config says, else as its counts do (a
    report without its config)."""
    config = report.get("config")
    if config:
        return bool(config.get("tool_failure_rate") or config.get("tool_latency"))
    return any(report["by_mode"][mode]["faults"]["injected"]["tool_calls_seen"]
               for mode in report["modes"])


def _compare(changes: dict[str, Any]) -> str:
    rows = [[name, _pct(d["before"]), _pct(d["after"]),
             "-" if d["delta"] is None else f"{100 * d['delta']:+.1f} pts"]
            for name, d in changes["overall"].items()]
    moved = [[c["key"], "ok" if c["correct"][0] else "wrong", "ok" if c["correct"][1] else
              "wrong", f"{c['status'][0]} -> {c['status'][1]}"] for c in changes["changed"]]
    return (f"<p>{esc(changes['fixed'])} fixed, {esc(changes['broken'])} broken</p>"
            + table(["metric", "before", "after", "delta"], rows)
            + table(["task run", "before", "after", "status"], moved))


def _failures(report: dict[str, Any], trace_link: TraceLink) -> str:
    failures = failed(report)
    items = []
    for r in failures:
        anchor = _trace_anchor(r, trace_link)
        summary = (f'<span class="id">{esc(r["key"])}</span>{_verdict(r)} '
                   f'{esc(r["category"])}{anchor}')
        body = (f"<h3>Task</h3>{pre(r['input'])}<h3>Expected</h3>{pre(str(r['expected']))}"
                f"<h3>Final answer</h3>{pre(str(r['final_answer']))}"
                f"<p class=\"kv\">steps {esc(r['steps'])}; tool calls {esc(r['calls_made'])} "
                f"({esc(r['invalid_calls'])} invalid); tool calls correct: "
                f"{esc(r['tool_calls_correct'])}; reason: {esc(r['reason'])}</p>")
        items.append(details(summary, body, cls="failure", attrs=f'id="{esc(r["key"])}"'))
    return (f"<h2>Failures ({len(failures)} of {counted(len(report['results']), 'run')})</h2>"
            + ("".join(items) or '<p class="ok">none</p>'))


def _verdict(result: dict[str, Any]) -> str:
    """A failed run's badges: why it failed (in the failure colour), then its status, which
    is not green even when the run completed (it completed with a wrong answer)."""
    status = result["status"]
    why = "wrong answer" if str(result.get("final_answer") or "").strip() else "no answer"
    shown = "" if status == "completed" else status_class(status)
    return (f'<span class="tag bad verdict">{why}</span>'
            f'<span class="tag {shown}">{esc(status)}</span>')


def _trace_anchor(result: dict[str, Any], trace_link: TraceLink) -> str:
    """The summary's link to the run's trace page, or why there is none."""
    try:
        href = trace_link(result)
    except TraceRefused as refused:
        return f' <span class="tag bad trace-refused">trace refused: {esc(refused)}</span>'
    if href is None:
        return ' <span class="muted">no trace</span>'
    return f' <a class="trace-link" href="{esc(href)}">trace</a>'


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def confined(trace: object, root: Path) -> Path | None:
    """The trace file ``trace`` names if it is a ``.jsonl`` file inside ``root``, None if
    there is no such file (or no trace).

    Raises:
        TraceRefused: ``trace`` is a URL, an absolute path, or leads (by ``..`` or a symbolic
            link) outside ``root``, or its page would.
    """
    if not trace:
        return None
    shown = repr(trace)[:200]
    if not isinstance(trace, str) or "\0" in trace:
        raise TraceRefused(f"{shown} is not a file name")
    if _SCHEME.match(trace) or Path(trace).is_absolute():  # a URL, or a file elsewhere
        raise TraceRefused(f"{shown} is not a path inside the output folder")
    if not trace.endswith(".jsonl"):
        raise TraceRefused(f"{shown} is not a .jsonl file")
    try:
        home = root.resolve()
        jsonl = (home / trace).resolve()  # symbolic links and .. resolved
        page = jsonl.with_suffix(".html").resolve()  # a link there must not lead out either
        inside = jsonl.is_relative_to(home) and page.is_relative_to(home)
        exists = inside and jsonl.is_file()
    except (OSError, RuntimeError) as exc:  # a name too long, a loop of links
        raise TraceRefused(f"{shown} cannot be resolved ({exc})") from None
    if not inside:
        raise TraceRefused(f"{shown} is outside the output folder")
    return jsonl if exists else None


def _write_trace_pages(report: dict[str, Any], page_dir: Path, traces_root: Path
                       ) -> dict[str, str | TraceRefused | None]:
    """Each failed run's trace page, written next to its JSONL file: its link relative to
    ``page_dir`` by the run's key (or why there is none)."""
    links: dict[str, str | TraceRefused | None] = {}
    for result in failed(report):
        try:
            jsonl = confined(result.get("trace"), traces_root)
        except TraceRefused as refused:
            links[result["key"]] = refused
            continue
        if jsonl is None:
            links[result["key"]] = None
            continue
        target = jsonl.with_suffix(".html")
        try:
            write_trace_html(jsonl, target)
        except (UserError, OSError) as exc:  # a damaged trace costs its link, not the report
            links[result["key"]] = TraceRefused(f"unreadable ({exc})")
            continue
        relative = Path(os.path.relpath(target, page_dir.resolve())).as_posix()
        # percent-encoded, so a file named "javascript:..." is a relative path, never a scheme
        links[result["key"]] = quote(relative)
    return links


def _looked_up(links: dict[str, str | TraceRefused | None]) -> TraceLink:
    def link(result: dict[str, Any]) -> str | None:
        found = links.get(result["key"])
        if isinstance(found, TraceRefused):
            raise found
        return found
    return link

"""A JSONL trace as one self-contained HTML page (``miniagent trace html FILE -o report.html``).

For each run: a summary, tokens per step as an inline SVG chart, and the step timeline. Each
step is a ``<details>`` element that expands to the exact prompt sent (every wire message, the
tools offered, the settings, the grammar), the raw output, what the protocol parsed from it, the
tool calls with their observations, and what the guards did. Steps have anchors
(``#run-1-step-3``) that open them, so another report can link to one step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from miniagent._internal.files import write_private
from miniagent._internal.wording import counted, token_count, unreported_tokens
from miniagent.core.types import TokenUsage
from miniagent.observe.reader import (
    ModelCall,
    RunView,
    StepView,
    ToolRun,
    Trace,
    objects,
    read_trace,
)
from miniagent.observe.reader import number as finite
from miniagent.report.html import BarSeries, bar_chart, csp, details, esc, page, pre, status_class

__all__ = ["POLICY", "render_trace", "write_trace_html"]

STYLE = """
.run { margin-bottom: 36px; }
.summary-line span { margin-right: 14px; }
ol.timeline { list-style: none; padding: 0; margin: 0; }
ol.timeline > li { margin: 0; }
.step > summary { display: flex; gap: 10px; align-items: center; }
.step > summary .idx { font-weight: 600; min-width: 52px; }
.step > summary .what { flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.gantt { position: relative; width: 160px; height: 10px; background: var(--panel);
  border: 1px solid var(--line); border-radius: 3px; flex: none; }
.gantt i { position: absolute; top: 0; bottom: 0; background: var(--s1); border-radius: 2px;
  min-width: 2px; }
.gantt i.tool { background: var(--s3); }
.msg { margin: 6px 0; } .msg .role { font-size: 12px; font-weight: 600; color: var(--muted); }
.obs.error pre { border-color: var(--bad); }
.kv { color: var(--muted); font-size: 12.5px; }
.controls { margin: 6px 0; } .controls button { margin-right: 6px; }
"""

SCRIPT = """
(function () {
  function all(open) {
    document.querySelectorAll('details.step').forEach(function (d) { d.open = open; });
  }
  document.querySelectorAll('button[data-expand]').forEach(function (b) {
    b.addEventListener('click', function () { all(b.dataset.expand === 'all'); });
  });
  function openHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === 'DETAILS') { target.open = true; target.scrollIntoView(); }
  }
  window.addEventListener('hashchange', openHash);
  openHash();
})();
"""

POLICY = csp(SCRIPT)
"""The Content-Security-Policy of a trace page: its own script runs, nothing else."""


def write_trace_html(trace_file: str | os.PathLike[str], out: str | os.PathLike[str]) -> Trace:
    """Read ``trace_file`` and write its report to ``out``; returns the trace read."""
    trace = read_trace(trace_file)
    write_private(out, render_trace(trace))
    return trace


def render_trace(trace: Trace, *, back: tuple[str, str] | None = None) -> str:
    """The whole page for ``trace``; with ``back`` (an address and its words), a link above
    the title to where the page was opened from (the inbox's session page)."""
    first = trace.runs[0]
    title = f"Trace: {_clip(first.question, 100)}" if first.question else "Trace"
    runs = "".join(_run(run, n, len(trace.runs)) for n, run in enumerate(trace.runs, 1))
    skipped = (f'<p class="warn">Skipped {counted(len(trace.skipped), "line")} of the file, '
               f"not trace records (lines {esc(_listed(trace.skipped))}).</p>"
               if trace.skipped else "")
    link = (f'<nav><a class="back" href="{esc(back[0])}">{esc(back[1])}</a></nav>'
            if back else "")
    body = (f"{link}<h1>{esc(title)}</h1><p class=\"muted\">{esc(trace.path.name)} · "
            f"{counted(len(trace.runs), 'run')}</p>{skipped}{runs}")
    return page(title, body, style=STYLE, script=SCRIPT)


def _listed(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:20])) + (" ..." if len(numbers) > 20 else "")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _run(run: RunView, number: int, total: int) -> str:
    result, usage, status = run.result or {}, run.usage, run.status
    facts = [
        f'<span class="tag {status_class(status)}">{esc(status)}</span>',
        f"<span>{counted(len(run.steps), 'step')}</span>",
        f"<span>{_tokens(usage, token_count)}</span>",
        f"<span>{finite(result.get('elapsed')):.2f} s</span>",
    ]
    if run.model:
        facts.append(f"<span>model {esc(run.model)}</span>")
    facts.append(f'<span class="muted">session {esc(run.session_id)}</span>')
    answer = ""
    if result.get("final_answer") is not None:
        answer = f"<h3>Final answer</h3>{pre(str(result['final_answer']), cls='answer')}"
    reason = f'<p class="kv">Reason: {esc(result.get("reason", ""))}</p>' if result else (
        '<p class="warn">The trace ends before this run finished.</p>')
    guards = "".join(_guard(g) for g in run.guards)
    return (f'<section class="run" id="run-{number}"><h2>Run {number} of {total}</h2>'
            f'<p class="summary-line">{"".join(facts)}</p>'
            f"<h3>Question</h3>{pre(run.question, cls='question')}"
            f"{_chart(run)}<h3>Timeline</h3>"
            '<div class="controls"><button type="button" data-expand="all">Expand all</button>'
            '<button type="button" data-expand="none">Collapse all</button></div>'
            f'<ol class="timeline">{"".join(_step(run, s, number) for s in run.steps)}</ol>'
            f"{guards}{answer}{reason}</section>")


def _tokens(usage: TokenUsage, unknown: Callable[[TokenUsage], str]) -> str:
    """Counted tokens, or what ``unknown`` says of tokens the server did not report."""
    if not usage.known:
        return unknown(usage)
    return (f"{usage.prompt_tokens or 0:,} prompt ({usage.cached_tokens or 0:,} cached) + "
            f"{usage.completion_tokens or 0:,} completion tokens")


def _chart(run: RunView) -> str:
    if not run.steps:
        return ""
    labels = [str(s.index) for s in run.steps]
    usages = [s.usage for s in run.steps]
    cached = [u.cached_tokens or 0 for u in usages]
    series = [
        BarSeries(name="prompt, cached", values=cached, color="var(--s2)"),
        BarSeries(name="prompt, not cached",
                  values=[max(0, (u.prompt_tokens or 0) - c) for u, c in zip(usages, cached)],
                  color="var(--s1)"),
        BarSeries(name="completion", values=[u.completion_tokens or 0 for u in usages],
                  color="var(--s3)"),
    ]
    if not all(u.known for u in usages):
        series.append(BarSeries(name="not reported, estimated", color="var(--s4)",
                                values=[0 if u.known else u.estimated_tokens for u in usages]))
    return bar_chart(labels, series, title="Tokens per step")


def _gantt(run: RunView, step: StepView) -> str:
    start, end = run.started_at, run.ended_at or step.ended_at
    if start is None or end is None or end <= start:
        return '<span class="gantt"></span>'
    span = end - start

    def bar(begin: float | None, length: float | None, cls: str = "") -> str:
        if begin is None or length is None:
            return ""
        left = max(0.0, min(100.0, (begin - start) / span * 100))
        width = max(0.0, min(100.0 - left, length / span * 100))
        klass = f' class="{cls}"' if cls else ""
        return f'<i{klass} style="left:{left:.2f}%;width:{width:.2f}%"></i>'

    bars = [bar(c.started_at, c.elapsed) for c in step.model_calls]
    bars += [bar(t.started_at, (t.finished_at or t.started_at) - t.started_at, "tool")
             for t in step.tools]
    return f'<span class="gantt" title="when this step ran within the run">{"".join(bars)}</span>'


def _what(step: StepView) -> str:
    parsed = step.parsed
    if step.outcome == "failed":
        return f"model call failed: {step.model_calls[-1].error}"
    if step.outcome == "final":
        return f"Final Answer: {parsed.get('final_answer') or ''}"
    if step.outcome == "invalid":
        return f"unparseable output: {parsed.get('error') or ''}"
    if step.tools:
        return " · ".join(f"{t.name} {_args(t.call)}" for t in step.tools)
    return " · ".join(f"{c.get('name')} {_args(c)}" for c in objects(parsed.get("tool_calls")))


def _args(call: dict[str, Any]) -> str:
    args = call.get("arguments") or call.get("raw_arguments") or {}
    return _clip(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False), 120)


def _step(run: RunView, step: StepView, run_number: int) -> str:
    usage = step.usage
    tok = (f"{usage.counted_tokens:,} tok" if usage.known
           else f"~{usage.counted_tokens:,} tok (estimated)")
    seconds = sum(c.elapsed or 0 for c in step.model_calls)
    outcome = step.outcome
    summary = (f'<span class="idx">step {step.index}</span>'
               f'<span class="tag {"bad" if outcome in ("failed", "invalid") else "ok"}">'
               f"{esc(outcome)}</span>"
               f'<span class="what">{esc(_clip(_what(step), 200))}</span>'
               f'<span class="kv">{seconds:.2f} s · {tok}</span>'
               f"{_gantt(run, step)}")
    body = "".join(_model_call(c, n, len(step.model_calls))
                   for n, c in enumerate(step.model_calls, 1))
    if step.tools:
        body += "<h3>Tool calls</h3>" + "".join(_tool(t) for t in step.tools)
    for approval in step.approvals:
        body += (f'<p class="warn">Waiting for approval: {esc(approval.get("tool"))} '
                 f"(call {esc(approval.get('call_id'))})</p>")
    body += "".join(_guard(g) for g in step.guards)
    body += "".join(_wait(w) for w in step.waits)
    anchor = f'id="run-{run_number}-step-{step.index}" data-step="{step.index}"'
    return f"<li>{details(summary, body, cls='step', attrs=anchor)}</li>"


def _model_call(call: ModelCall, number: int, count: int) -> str:
    label = f" {number} of {count}" if count > 1 else ""
    parts = [f"<h3>Prompt{esc(label)}</h3>", _request(call.request)]
    if call.retried:
        parts += ["<h3>Retried as</h3>", _request(call.retried)]
    if call.error is not None:
        parts.append(f'<h3 class="bad">Model call failed ({esc(call.error_type or "error")}, '
                     f"{call.elapsed or 0:.2f} s)</h3>{pre(call.error)}")
        return "".join(parts)
    response = call.response or {}
    usage = call.usage
    parts.append(f"<h3>Raw output</h3>"
                 f'<p class="kv">{call.elapsed or 0:.2f} s · finish reason '
                 f"{esc(response.get('finish_reason'))} · "
                 f"{_tokens(usage, unreported_tokens)}</p>")
    parts.append(pre(str(response.get("content") or ""), cls="raw-output"))
    if response.get("tool_calls"):
        parts.append(f"<p class=\"kv\">native tool calls</p>{pre(_json(response['tool_calls']))}")
    parts.append(f"<h3>Parsed</h3>{_parsed(call.parsed or {})}")
    return "".join(parts)


def _request(request: dict[str, Any]) -> str:
    settings = {k: request.get(k) for k in ("protocol", "temperature", "max_tokens", "stop")
                if request.get(k) not in (None, "", [])}
    extra = request.get("extra_body")
    if extra:
        settings["extra_body"] = extra
    out = [f'<p class="kv request-settings">{esc(_settings_text(settings))}</p>']
    for message in objects(request.get("messages")):
        content = message.get("content")
        text = content if isinstance(content, str) else _json(content) if content else ""
        calls = message.get("tool_calls")
        if calls:
            text += ("\n" if text else "") + "tool_calls: " + _json(calls)
        role = str(message.get("role"))
        if message.get("tool_call_id"):
            role += f" ({message['tool_call_id']})"
        out.append(f'<div class="msg"><div class="role">{esc(role)}</div>'
                   f"{pre(text, cls='prompt')}</div>")
    tools = objects(request.get("tools"))
    if tools:
        out.append(details(esc(f"tools offered ({len(tools)})"), pre(_json(tools))))
    if request.get("grammar"):
        out.append(details(esc("grammar (GBNF)"), pre(str(request["grammar"]))))
    return "".join(out)


def _settings_text(settings: dict[str, Any]) -> str:
    """A request's settings as one JSON object: text as it is, but the stop words by their
    escapes, exact code points that any font draws (``"\\nObservation\\uff1a"``: the
    full-width colon itself is a box where no CJK font is installed)."""
    fields = (f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=key == 'stop')}"
              for key, value in settings.items())
    return "{" + ", ".join(fields) + "}"


def _parsed(parsed: dict[str, Any]) -> str:
    rows = [f'<p class="kv">kind <span class="tag">{esc(parsed.get("kind", "?"))}</span></p>']
    for key in ("thought", "final_answer", "error"):
        if parsed.get(key) not in (None, ""):
            rows.append(f"<p class=\"kv\">{esc(key.replace('_', ' '))}</p>{pre(str(parsed[key]))}")
    calls = objects(parsed.get("tool_calls"))
    if calls:
        lines = "\n".join(f"{c.get('name')} {_args(c)}  (id {c.get('id')})" for c in calls)
        rows.append(f'<p class="kv">tool calls</p>{pre(lines)}')
    return "".join(rows)


def _tool(tool: ToolRun) -> str:
    obs = tool.observation
    head = f"<p><strong>{esc(tool.name)}</strong> <span class=\"kv\">call " \
           f"{esc(tool.call.get('id'))}</span></p>{pre(_args_full(tool.call))}"
    if obs is None:
        return head + '<p class="warn">No observation: the trace ends before the tool returned.</p>'
    error = bool(obs.get("is_error"))
    label = "Observation (error)" if error else "Observation"
    ms = finite(obs.get("elapsed")) * 1000
    return (f"{head}<div class=\"obs{' error' if error else ''}\"><p class=\"kv\">{label} · "
            f"{ms:.0f} ms</p>{pre(str(obs.get('output', '')), cls='observation')}</div>")


def _args_full(call: dict[str, Any]) -> str:
    args = call.get("arguments")
    if args:
        return _json(args)
    return str(call.get("raw_arguments") or "{}")


def _wait(wait: dict[str, Any]) -> str:
    call = f" (call {wait['call_id']})" if wait.get("call_id") else ""
    return (f'<p class="warn wait">Waited for a slot: {esc(wait.get("what"))}{esc(call)}: '
            f"{esc(wait.get('reason'))}</p>")


def _guard(guard: dict[str, Any]) -> str:
    call = f" (call {guard['call_id']})" if guard.get("call_id") else ""
    return (f'<p class="warn guard">Guard <strong>{esc(guard.get("guard"))}</strong>'
            f"{esc(call)}: {esc(guard.get('detail'))}</p>")

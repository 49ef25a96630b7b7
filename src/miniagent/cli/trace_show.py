"""``miniagent trace show``: a trace file as readable text, every foreign text escaped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from miniagent._internal.wording import counted, token_count, unreported_tokens
from miniagent.cli.safe_text import clip, visible
from miniagent.core.types import TokenUsage
from miniagent.observe.reader import ModelCall, RunView, StepView, Trace, objects
from miniagent.observe.reader import number as finite

SHORT = 600
"""Characters of a thought, observation or answer shown without ``--full``."""


def trace_lines(trace: Trace, *, full: bool = False) -> Iterator[str]:
    """The lines ``trace show`` prints (already safe for a terminal)."""
    for number, run in enumerate(trace.runs, 1):
        if number > 1:
            yield ""
        yield from _run_lines(run, number, len(trace.runs), full)
    if trace.skipped:
        listed = ", ".join(str(n) for n in trace.skipped[:10])
        more = " ..." if len(trace.skipped) > 10 else ""
        yield ""
        yield (f"(skipped {counted(len(trace.skipped), 'line')}, not trace records: "
               f"{listed}{more})")


def _text(value: Any, full: bool, limit: int = SHORT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.strip()
    return visible(clip(text) if full else _short(text, limit))


def _short(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters; --full shows them)"


def when(at: float | None) -> str:
    if at is None:
        return "?"
    try:
        return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"at {at}"


def tokens(usage: TokenUsage) -> str:
    if not usage.known:
        return unreported_tokens(usage)
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    return (f"{usage.prompt_tokens or 0:,} prompt{cached} + "
            f"{usage.completion_tokens or 0:,} completion tokens")


def _run_lines(run: RunView, number: int, total: int, full: bool) -> Iterator[str]:
    model = f" · model {visible(run.model)}" if run.model else ""
    yield f"Run {number} of {total} · session {visible(run.session_id)}{model} · " \
          f"{when(run.started_at)}"
    if run.question:
        yield f"Question: {_text(run.question, full)}"
    for step in run.steps:
        yield from _step_lines(step, full)
    for guard in run.guards:
        yield f"Guard [{visible(guard['guard'])}]: {_text(guard['detail'], full)}"
    yield _footer(run)


def _step_lines(step: StepView, full: bool) -> Iterator[str]:
    model_time = sum(c.elapsed or 0 for c in step.model_calls)
    if step.outcome == "resumed":
        yield f"── step {step.index} (resumed: the model call was in an earlier run)"
    else:
        yield f"── step {step.index} · model {model_time:.2f} s · {tokens(step.usage)}"
    for call in step.model_calls:
        yield from _model_lines(call, full)
    for tool in step.tools:
        args = tool.call.get("arguments") or tool.call.get("raw_arguments") or {}
        yield f"  Action: {visible(tool.name)} {_text(args, full, 300)}"
        obs = tool.observation
        if obs is None:
            yield "  Observation: (none: the trace ends before the tool returned)"
            continue
        label = "Observation (error)" if obs.get("is_error") else "Observation"
        ms = finite(obs.get("elapsed")) * 1000
        yield f"  {label} ({ms:.0f} ms): {_text(obs.get('output', ''), full)}"
    for approval in step.approvals:
        yield f"  Waiting for approval: {visible(str(approval.get('tool')))} " \
              f"(call {visible(str(approval.get('call_id')))})"
    for guard in step.guards:
        yield f"  Guard [{visible(guard['guard'])}]: {_text(guard['detail'], full)}"
    for wait in step.waits:
        yield f"  Waited for a slot: {visible(wait['what'])} ({_text(wait['reason'], full)})"


def _model_lines(call: ModelCall, full: bool) -> Iterator[str]:
    if full:
        for message in objects(call.sent.get("messages")):
            yield f"  prompt · {visible(str(message.get('role')))}: " \
                  f"{_text(message.get('content') or '', True)}"
    if call.error is not None:
        kind = f"{visible(call.error_type)}: " if call.error_type else ""
        yield f"  Model failed: {kind}{_text(call.error, full)}"
        return
    parsed = call.parsed or {}
    answered = _dict_get(call.response, "model")  # which of a FallbackModel's models
    if isinstance(answered, str):
        yield f"  Answered by {visible(answered)}"
    if full:
        yield f"  raw output: {_text(_dict_get(call.response, 'content') or '', True)}"
    if parsed.get("thought"):  # an unparsed reply's text is kept as its thought
        label = "Unparsed reply" if parsed.get("kind") == "invalid" else "Thought"
        yield f"  {label}: {_text(parsed['thought'], full)}"
    if parsed.get("kind") == "final":
        yield f"  Final Answer: {_text(parsed.get('final_answer') or '', full)}"
    elif parsed.get("kind") == "invalid":
        yield f"  Format error: {_text(parsed.get('error') or '', full)}"


def _dict_get(value: dict[str, Any] | None, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _footer(run: RunView) -> str:
    result = run.result
    if result is None:
        return "(the trace ends before the run finished)"
    usage = run.usage
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    steps = int(finite(result.get("steps"), len(run.steps)))  # the file's text is not printed
    return (f"{visible(str(result.get('status')))} · {counted(steps, 'step')}"
            f" · {token_count(usage)}{cached} · {finite(result.get('elapsed')):.2f} s · "
            f"{_text(str(result.get('reason', '')), False, 300)}")

"""Events as plain JSON records: the form a JSONL trace keeps, one object per event.

Every record has ``v`` (the record format, :data:`TRACE_VERSION`), ``kind``, ``session_id``,
``span_id``, ``parent_id``, ``step`` and ``at``, then the event's own fields as JSON. Two fields
are shortened on purpose: a ``model_responded`` record keeps the server's answer without its
``choices`` (already there as ``content`` and ``tool_calls``) under ``response.meta``, and a
``run_finished`` record keeps the result without its steps and messages (the records before it
hold them), with ``steps`` as their count.

A token usage is ``prompt_tokens``, ``completion_tokens`` and ``cached_tokens`` as the server
reported them; when it reported none, the three are null and ``estimated_tokens`` is the step
logic's estimate (:mod:`miniagent.core.runtime.guards`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from miniagent.core.runtime import events as ev
from miniagent.core.types import ModelResponse, RunResult, TokenUsage

__all__ = ["TRACE_VERSION", "event_record", "result_record"]

TRACE_VERSION = 1


def event_record(event: ev.Event) -> dict[str, Any]:
    """``event`` as a JSON-ready dict (not yet redacted)."""
    record: dict[str, Any] = {"v": TRACE_VERSION, "kind": event.kind}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, ModelResponse):
            record[field.name] = _response(value)
        elif isinstance(value, RunResult):
            record[field.name] = result_record(value)
        else:
            record[field.name] = _plain(value)
    return record


def _plain(value: Any) -> Any:
    """Dataclasses as dicts, at any depth in lists; dicts are kept as they are (wire messages,
    arguments and server answers are JSON already, and are not copied: a history is large)."""
    if isinstance(value, list):
        return [_plain(v) for v in value] if any(_needs_plain(v) for v in value) else value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, TokenUsage):
        return _usage(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _needs_plain(value: Any) -> bool:
    return value is not None and not isinstance(value, (dict, str, int, float, bool))


def _usage(usage: TokenUsage) -> dict[str, Any]:
    counts = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
              "cached_tokens": usage.cached_tokens}
    return counts if usage.known else {**counts, "estimated_tokens": usage.estimated_tokens}


def _response(response: ModelResponse) -> dict[str, Any]:
    raw = response.raw
    meta = {k: v for k, v in raw.items() if k != "choices"} if isinstance(raw, dict) else None
    record = {
        "content": response.content,
        "tool_calls": _plain(response.tool_calls),
        "usage": _plain(response.usage),
        "finish_reason": response.finish_reason,
        "meta": meta,
    }
    if response.model is not None:  # which of a FallbackModel's models answered
        record["model"] = response.model
    return record


def result_record(result: RunResult) -> dict[str, Any]:
    """What a trace records of a run's result (``miniagent run --json`` adds to it)."""
    return {
        "status": result.status,
        "reason": result.reason,
        "session_id": result.session_id,
        "final_answer": result.final_answer,
        "steps": len(result.steps),
        "usage": _plain(result.usage),
        "elapsed": result.elapsed,
        "pending_approvals": _plain(result.pending_approvals),
    }

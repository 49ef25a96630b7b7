"""Reading a JSONL trace back as runs, steps, model calls and tool calls.

A trace file may hold several runs (it is appended to), a last line cut short by a crash, or
lines that are not records at all: every line that is a record is used, and the others are
counted in :attr:`Trace.skipped` with their line numbers, never silently dropped.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = path.write_text(json.dumps({"kind": "run_started", "session_id": "s",
    ...     "span_id": "r", "at": 0, "question": "hi"}) + "\\n{broken\\n")
    >>> trace = read_trace(path)
    >>> trace.runs[0].question, trace.skipped
    ('hi', [2])
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, get_args

from miniagent.core.errors import UserError
from miniagent.core.runtime.events import EventKind
from miniagent.core.types import TokenUsage

__all__ = ["ModelCall", "RunView", "StepView", "ToolRun", "Trace", "TraceFollower", "number",
           "objects", "read_trace", "usage_of"]

MAX_TRACE_BYTES = 512 * 1024 * 1024
"""A larger file is refused rather than read into memory."""


def number(value: Any, default: float = 0.0) -> float:
    """``value`` if it is a finite number (not a bool), else ``default``: trace files are
    read as untrusted input."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    try:
        result = float(value)
    except OverflowError:  # an int too large for a float
        return default
    return result if math.isfinite(result) else default


def usage_of(value: Any) -> TokenUsage:
    """A record's token usage: unknown when it has neither a prompt nor a completion count (a
    server that reported none: null counts and ``estimated_tokens``)."""
    usage = _dict(value)
    counts = [usage.get(key) for key in ("prompt_tokens", "completion_tokens", "cached_tokens")]
    if not any(_is_count(c) for c in counts[:2]):
        return TokenUsage.unknown(estimated=int(number(usage.get("estimated_tokens"))))
    prompt, completion, cached = (int(number(c)) for c in counts)
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


def _is_count(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def objects(value: Any) -> list[dict[str, Any]]:
    """The JSON objects in ``value`` if it is a list, else none."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


@dataclass
class ModelCall:
    """One model call: what was sent, what came back (or the error), and how long it took."""

    span_id: str
    started_at: float
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    parsed: dict[str, Any] | None = None
    retried: dict[str, Any] | None = None
    elapsed: float | None = None
    error: str | None = None
    error_type: str | None = None

    @property
    def usage(self) -> TokenUsage:
        """What the server reported (unknown when it reported none); none for a failed call."""
        if self.response is None:
            return TokenUsage()
        return usage_of(_dict(self.response).get("usage"))

    @property
    def sent(self) -> dict[str, Any]:
        """The request that was answered: the protocol's retry, if there was one."""
        return self.retried or self.request


@dataclass
class ToolRun:
    """One tool call and its observation (None if the trace ends before it returned)."""

    span_id: str
    started_at: float
    call: dict[str, Any]
    observation: dict[str, Any] | None = None
    finished_at: float | None = None

    @property
    def name(self) -> str:
        return str(self.call.get("name", "?"))


@dataclass
class StepView:
    """One step: its model call(s), the tools it ran, what the guards did, and the waits for a
    slot (a tool's ``max_concurrency``, a model endpoint's limits)."""

    index: int
    started_at: float | None = None
    ended_at: float | None = None
    model_calls: list[ModelCall] = field(default_factory=list)
    tools: list[ToolRun] = field(default_factory=list)
    guards: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    waits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def usage(self) -> TokenUsage:
        return sum((call.usage for call in self.model_calls), TokenUsage())

    @property
    def parsed(self) -> dict[str, Any]:
        last = self.model_calls[-1] if self.model_calls else None
        return _dict(last.parsed) if last else {}

    @property
    def outcome(self) -> str:
        """``action``, ``final``, ``invalid``, ``failed`` (the model call), ``resumed`` (the
        step's model call was in an earlier run; its calls ran in this one), or ``unknown``."""
        if not self.model_calls:
            return "resumed" if self.tools or self.approvals else "unknown"
        if self.model_calls[-1].error is not None:
            return "failed"
        kind = self.parsed.get("kind")
        return str(kind) if kind in ("action", "final", "invalid") else "unknown"


@dataclass
class RunView:
    """One run of a session, as far as the trace goes."""

    session_id: str
    span_id: str
    question: str = ""
    model: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    steps: list[StepView] = field(default_factory=list)
    guards: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    _by_index: dict[int, StepView] = field(default_factory=dict, init=False, repr=False,
                                           compare=False)
    """The steps by number: every record names its step, so a scan of ``steps`` per record
    made reading a trace quadratic in its steps."""

    def step(self, index: int) -> StepView:
        """The step numbered ``index``, added to :attr:`steps` the first time it is named."""
        step = self._by_index.get(index)
        if step is None:
            step = self._by_index[index] = StepView(index=index)
            self.steps.append(step)
        return step

    @property
    def status(self) -> str:
        return str(_dict(self.result).get("status", "unfinished"))

    @property
    def usage(self) -> TokenUsage:
        """The run's token usage as its result reports it, else the sum of its steps."""
        reported = _dict(self.result).get("usage")
        if not _dict(reported):
            return sum((step.usage for step in self.steps), TokenUsage())
        return usage_of(reported)


@dataclass
class Trace:
    path: Path
    runs: list[RunView]
    skipped: list[int]
    """Numbers of the lines that were not trace records."""


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read the trace file at ``path``.

    Raises:
        UserError: the file cannot be read, is too large, or holds no trace record.
    """
    trace = TraceFollower(path).read(to_the_end=True)
    if not trace.runs:
        raise UserError(f"{path} holds no trace record (a JSONL file written by --trace)")
    return trace


class TraceFollower:
    """A trace file read as it grows (the inbox's ``--trace``, appended to by its runs): each
    :meth:`read` parses only the lines appended since the previous one, so a large file costs
    its new lines, not its size. A file replaced (another inode) or cut shorter is read again
    from its start. One reader at a time: the caller serialises its calls.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._restart(None)

    def _restart(self, ident: tuple[int, int] | None) -> None:
        self._ident, self._offset, self._lines = ident, 0, 0
        self._builder, self._skipped = _Builder(), list[int]()

    def read(self, *, to_the_end: bool = False) -> Trace:
        """The trace so far: the runs of every whole line (ending in a newline; with
        ``to_the_end``, the last line too, even cut short). The runs are this follower's own,
        updated by the next read.

        Raises:
            UserError: the file cannot be read, or is larger than ``MAX_TRACE_BYTES``.
        """
        try:
            stat = self.path.stat()
            if stat.st_size > MAX_TRACE_BYTES:
                raise UserError(f"{self.path} is larger than {MAX_TRACE_BYTES >> 20} MiB")
            ident = (stat.st_dev, stat.st_ino)
            if ident != self._ident or stat.st_size < self._offset:
                self._restart(ident)
            if stat.st_size > self._offset:
                with self.path.open("rb") as file:
                    file.seek(self._offset)
                    chunk = file.read(stat.st_size - self._offset)
                whole = len(chunk) if to_the_end else chunk.rfind(b"\n") + 1
                self._add(chunk[:whole].decode("utf-8", errors="replace"))
                self._offset += whole
        except OSError as exc:
            raise UserError(f"cannot read the trace {self.path}: {exc.strerror or exc}"
                            ) from None
        return Trace(path=self.path, runs=self._builder.runs, skipped=self._skipped)

    def _add(self, text: str) -> None:
        for line in text.splitlines():
            self._lines += 1
            if not line.strip():
                continue
            record = _record(line)
            if record is None or not self._builder.add(record):
                self._skipped.append(self._lines)


def _record(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str) or not isinstance(
            value.get("session_id"), str):
        return None
    return value


class _Builder:
    def __init__(self) -> None:
        self.runs: list[RunView] = []
        self._current: dict[str, RunView] = {}
        self._models: dict[str, ModelCall] = {}
        self._tools: dict[str, ToolRun] = {}

    def add(self, r: dict[str, Any]) -> bool:
        """Add one record; False when its kind is not one a trace holds."""
        kind, at = r["kind"], number(r.get("at"))
        if kind not in _KNOWN_KINDS:
            return False
        if kind == "run_started":
            run = RunView(session_id=r["session_id"], span_id=str(r.get("span_id", "")),
                          question=str(r.get("question", "")), started_at=at,
                          model=r.get("model") if isinstance(r.get("model"), str) else None)
            self.runs.append(run)
            self._current[run.session_id] = run
            return True
        run = self._run_of(r)
        index = int(number(r.get("step")))
        step = run.step(index) if index > 0 else None
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, r, run, step, at)
        return True

    def _run_of(self, r: dict[str, Any]) -> RunView:
        run = self._current.get(r["session_id"])
        if run is None:  # the file starts in the middle of a run
            run = RunView(session_id=r["session_id"], span_id="")
            self.runs.append(run)
            self._current[run.session_id] = run
        return run

    def _step_started(self, r: dict[str, Any], run: RunView, step: StepView | None,
                      at: float) -> None:
        if step is not None:
            step.started_at = at

    def _step_finished(self, r: dict[str, Any], run: RunView, step: StepView | None,
                       at: float) -> None:
        if step is not None:
            step.ended_at = at

    def _model_started(self, r: dict[str, Any], run: RunView, step: StepView | None,
                       at: float) -> None:
        if step is not None:
            call = ModelCall(span_id=_span(r), started_at=at, request=_dict(r.get("request")))
            step.model_calls.append(_opened(self._models, call, step))

    def _model_responded(self, r: dict[str, Any], run: RunView, step: StepView | None,
                         at: float) -> None:
        call = self._models.pop(_span(r), None)
        if call is not None:
            call.response, call.parsed = _dict(r.get("response")), _dict(r.get("parsed"))
            call.retried = _dict(r.get("retried")) or None
            call.elapsed = number(r.get("elapsed"))

    def _model_failed(self, r: dict[str, Any], run: RunView, step: StepView | None,
                      at: float) -> None:
        call = self._models.pop(_span(r), None)
        if call is not None:
            call.error = str(r.get("error", ""))
            call.error_type = str(r.get("error_type") or "") or None
            call.elapsed = number(r.get("elapsed"))

    def _tool_started(self, r: dict[str, Any], run: RunView, step: StepView | None,
                      at: float) -> None:
        if step is not None:
            tool = ToolRun(span_id=_span(r), started_at=at, call=_dict(r.get("call")))
            step.tools.append(_opened(self._tools, tool, step))

    def _tool_finished(self, r: dict[str, Any], run: RunView, step: StepView | None,
                       at: float) -> None:
        tool = self._tools.pop(_span(r), None)
        if tool is not None:
            tool.observation, tool.finished_at = _dict(r.get("observation")), at

    def _guard_intervened(self, r: dict[str, Any], run: RunView, step: StepView | None,
                          at: float) -> None:
        guard = {"guard": str(r.get("guard", "")), "detail": str(r.get("detail", "")),
                 "call_id": r.get("call_id"), "at": at}
        (step.guards if step is not None else run.guards).append(guard)

    def _slot_waiting(self, r: dict[str, Any], run: RunView, step: StepView | None,
                      at: float) -> None:
        if step is not None:
            step.waits.append({"what": str(r.get("what", "")), "reason": str(r.get("reason", "")),
                               "call_id": r.get("call_id"), "at": at})

    def _approval_requested(self, r: dict[str, Any], run: RunView, step: StepView | None,
                            at: float) -> None:
        if step is not None:
            step.approvals += objects(r.get("pending"))

    def _run_finished(self, r: dict[str, Any], run: RunView, step: StepView | None,
                      at: float) -> None:
        run.result, run.ended_at = _dict(r.get("result")), at
        self._current.pop(run.session_id, None)


_Span = TypeVar("_Span", ModelCall, ToolRun)


def _span(r: dict[str, Any]) -> str:
    return str(r.get("span_id"))


def _opened(spans: dict[str, _Span], span: _Span, step: StepView) -> _Span:
    """``span``, kept under its id till the event that ends it; its step began by then."""
    spans[span.span_id] = span
    if step.started_at is None:
        step.started_at = span.started_at
    return span


_Handler = Callable[[_Builder, dict[str, Any], RunView, "StepView | None", float], None]

# The kind comes from the file, so it picks a handler from this table only.
_HANDLERS: dict[str, _Handler] = {
    "step_started": _Builder._step_started,
    "step_finished": _Builder._step_finished,
    "model_started": _Builder._model_started,
    "model_responded": _Builder._model_responded,
    "model_failed": _Builder._model_failed,
    "tool_started": _Builder._tool_started,
    "tool_finished": _Builder._tool_finished,
    "guard_intervened": _Builder._guard_intervened,
    "slot_waiting": _Builder._slot_waiting,
    "approval_requested": _Builder._approval_requested,
    "run_finished": _Builder._run_finished,
}
# Kinds a trace may hold, the ones shown above and those only passed over (model_delta, ...).
_KNOWN_KINDS: frozenset[str] = frozenset(get_args(EventKind)) | {"run_started", *_HANDLERS}

"""Typed events of a run: what happened, in which session, step and span, and when.

The step logic emits them through its driver; display (the CLI), traces and evaluation
subscribe, and the loop never prints::

    agent.subscribe(lambda e: print(e.kind, e.span_id, e.parent_id))

Spans nest: a run's span holds its steps' spans; a step's span holds its model call and its
tool calls. Every model call and every tool call has a start and an end event
(``model_started`` then ``model_responded`` or ``model_failed``; ``tool_started`` then
``tool_finished``); the summary call of ``compress="model"`` is reported by the
``context_compacted`` event that records its compaction, and the recall before a turn (an agent
with a memory) by ``memory_recalled``. ``at`` is the driver's clock
(seconds since the epoch in-process).

A streaming model (``OpenAICompatibleModel(stream=True)``) adds ``model_delta`` events between
``model_started`` and ``model_responded``, in the model call's span: each piece of text as it
is written. They come from the transport through the driver, not from the step logic.

A ``guard_intervened`` event is no span of its own: its ``span_id`` is the step (or run) it
happened in. It reports every guard that changed what the model sees or how the run ends: a
repeated call answered with a reminder (``repeat``) or stopped (``loop_stop``), calls beyond the
per-step limit (``call_limit``), a call not run because the reply was cut off before it was
complete (``cut_off``: ``finish_reason: length``, or arguments whose JSON was never closed),
a call not run because its arguments hold the worked example's placeholders (``placeholder``)
or figures nothing the model was told gives (``ungrounded``, under ``ground_figures``),
output that was neither an action nor an answer (``format_error``: an answer cut off by the
token limit too), a truncated observation (``truncated``), and ``max_steps`` (after the last
request for an answer at the limit, if there was one) / ``token_budget``.

A ``slot_waiting`` event is no span of its own either: its ``span_id`` is the tool call or the
model call that waits for a slot under a limit shared by the process
(:mod:`miniagent.core.throttles`:
a tool's ``max_concurrency``, a model endpoint's limits or its 429 back-off). It comes from the
executor or the model through the step logic's reporter, on every driver (a Temporal worker
relays it to the workflow).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from miniagent.core.types import (
    Compaction,
    ModelRequest,
    ModelResponse,
    Observation,
    ParsedOutput,
    PendingApproval,
    RunResult,
    ToolCall,
)

EventKind = Literal[
    "run_started", "step_started", "model_started", "model_delta", "model_responded",
    "model_failed",
    "tool_started", "tool_finished", "approval_requested", "step_finished", "run_finished",
    "context_compacted", "memory_recalled",
    "guard_intervened", "slot_waiting",
]


@dataclass(kw_only=True, slots=True, eq=False)
class Event:
    """The fields every event has; each kind below adds its own.

    Events compare by identity (``eq=False``): each is one happening, and two with the same
    fields are still two (a dataclass without generated ``__eq__`` is also cheaper to import).
    """

    kind: ClassVar[EventKind]
    session_id: str
    span_id: str
    parent_id: str | None = None
    step: int = 0
    at: float = 0.0


@dataclass(kw_only=True, slots=True, eq=False)
class RunStarted(Event):
    """A run began, or went on after a wait or a crash, on the turn's question."""

    kind: ClassVar[EventKind] = "run_started"
    question: str


@dataclass(kw_only=True, slots=True, eq=False)
class StepStarted(Event):
    """A step began: its span holds the step's model call and tool calls."""

    kind: ClassVar[EventKind] = "step_started"


@dataclass(kw_only=True, slots=True, eq=False)
class ModelStarted(Event):
    """The step's request is on its way to the model."""

    kind: ClassVar[EventKind] = "model_started"
    request: ModelRequest
    offered: list[str] | None = None
    """The tools a selection offered this request, by name (None: no selection, every tool)."""
    available: int = 0
    """How many tools the run has (of which ``offered`` were chosen)."""


@dataclass(kw_only=True, slots=True, eq=False)
class ModelDelta(Event):
    """A piece of a streamed answer, as it arrived.

    ``channel`` is ``content`` (the reply's text), ``reasoning`` (a reasoning model's
    ``reasoning_content``) or ``restart``: the stream broke off and the request is being sent
    again without streaming, so what was shown of this call so far is void (``text`` is empty).
    """

    kind: ClassVar[EventKind] = "model_delta"
    text: str
    channel: Literal["content", "reasoning", "restart"] = "content"


@dataclass(kw_only=True, slots=True, eq=False)
class ModelResponded(Event):
    """The model answered, and the protocol read its reply (``parsed``)."""

    kind: ClassVar[EventKind] = "model_responded"
    response: ModelResponse
    parsed: ParsedOutput
    elapsed: float
    retried: ModelRequest | None = None
    """The request answered when the protocol retried the started one (``recover`` after an
    error, or a ``retry`` reply; its usage then counts both replies)."""


@dataclass(kw_only=True, slots=True, eq=False)
class ModelFailed(Event):
    """The model call raised a model error (a timeout, an HTTP error, a bad reply)."""

    kind: ClassVar[EventKind] = "model_failed"
    error: str
    elapsed: float
    error_type: str = ""
    """The exception's class name (``ModelTimeout``, ``ModelHTTPError``, ...)."""


@dataclass(kw_only=True, slots=True, eq=False)
class ToolStarted(Event):
    """A tool call began."""

    kind: ClassVar[EventKind] = "tool_started"
    call: ToolCall


@dataclass(kw_only=True, slots=True, eq=False)
class ToolFinished(Event):
    """A tool call ended, with its observation (an error is an observation too)."""

    kind: ClassVar[EventKind] = "tool_finished"
    call: ToolCall
    observation: Observation


@dataclass(kw_only=True, slots=True, eq=False)
class ApprovalRequested(Event):
    """The run waits for a person to approve or deny these calls."""

    kind: ClassVar[EventKind] = "approval_requested"
    pending: list[PendingApproval]


@dataclass(kw_only=True, slots=True, eq=False)
class ContextCompacted(Event):
    """The oldest rounds were replaced by a summary before this step's model call."""

    kind: ClassVar[EventKind] = "context_compacted"
    compaction: Compaction


@dataclass(kw_only=True, slots=True, eq=False)
class MemoryRecalled(Event):
    """Before a turn's first step, the agent's memory was asked about its question: ``text``
    is the block the model sees with the question ("" when nothing was recalled; ``error``
    says why, when the recall failed or was not made)."""

    kind: ClassVar[EventKind] = "memory_recalled"
    query: str
    text: str
    error: str | None = None


@dataclass(kw_only=True, slots=True, eq=False)
class StepFinished(Event):
    """A step ended."""

    kind: ClassVar[EventKind] = "step_finished"


@dataclass(kw_only=True, slots=True, eq=False)
class RunFinished(Event):
    """A run ended, with its result (status, answer, usage)."""

    kind: ClassVar[EventKind] = "run_finished"
    result: RunResult


GuardName = Literal["repeat", "loop_stop", "call_limit", "format_error", "truncated",
                    "max_steps", "token_budget", "cut_off", "compress_at", "placeholder",
                    "output_invalid", "ungrounded"]


@dataclass(kw_only=True, slots=True, eq=False)
class GuardIntervened(Event):
    """A guard changed what the model sees or how the run ends (see above)."""

    kind: ClassVar[EventKind] = "guard_intervened"
    guard: GuardName
    detail: str
    call_id: str | None = None


@dataclass(kw_only=True, slots=True, eq=False)
class SlotWaiting(Event):
    """A tool call or a model call waits for a slot: ``what`` is ``tool NAME`` or
    ``model NAME at URL``; ``reason`` names the limit (or the 429 back-off)."""

    kind: ClassVar[EventKind] = "slot_waiting"
    what: str
    reason: str
    call_id: str | None = None

"""What travels between a client, the session workflow and its activities.

Plain keyword-only dataclasses, carried by Temporal's pydantic data converter (see
:mod:`miniagent.temporal.converter`). Nothing here reads a clock or makes an id, so building one
inside workflow code is safe; every field has a default or is given. The agent itself travels
as its :class:`~miniagent.core.runtime.run.AgentSpec`, the same description every driver runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from miniagent.core.retry import RetryPolicy
from miniagent.core.runtime.run import AgentSpec
from miniagent.core.session import AgentSession
from miniagent.core.types import Decision, PendingApproval, SessionStatus, ToolCall


@dataclass(kw_only=True)
class TemporalOptions:
    """How a session runs on Temporal (the agent's own settings are its spec)."""

    model_timeout: float = 120.0
    """Start-to-close timeout of one model call, seconds."""
    heartbeat_timeout: float = 10.0
    """Seconds without a heartbeat after which a tool's worker counts as dead."""
    model_attempts: int = 5
    """Attempts of one model call, for the errors retrying can fix."""
    rollover_bytes: int = 4 * 1024 * 1024
    """Continue as new once the workflow's history is this large (or Temporal suggests it)."""
    event_log: int = 1000
    """How many of the latest events the workflow keeps for clients that follow it."""


@dataclass(kw_only=True)
class SessionInput:
    """The workflow's input: a new session, or one carried over by continue-as-new."""

    session: AgentSession
    spec: AgentSpec = field(default_factory=AgentSpec)
    options: TemporalOptions = field(default_factory=TemporalOptions)
    runs: int = 1
    """Which run of the workflow this is (continue-as-new starts the next)."""


@dataclass(kw_only=True)
class ToolInput:
    """One tool call for the tool activity."""

    call: ToolCall
    session_id: str
    step: int
    metadata: dict[str, Any] = field(default_factory=dict)
    decision: Decision | None = None
    """A person's decision on what the call's sub-run waits for (agents as tools)."""
    tokens_left: int | None = None
    deadline: float | None = None
    steps_left: int | None = None
    """What is left of the run's token budget, its deadline and its model calls (see
    ToolContext)."""
    default_retry: RetryPolicy | None = None
    """The run's retry policy for tools that set none (the agent's ``tool_retry``)."""


@dataclass(kw_only=True)
class SlotWait:
    """An activity's call waits for a slot (:mod:`miniagent.core.throttles`): the worker
    tells the workflow, which emits ``slot_waiting`` in the call's span. ``key`` is the tool
    activity's id, or ``model`` for the model call."""

    key: str
    what: str
    reason: str


@dataclass(kw_only=True)
class DecisionInput:
    """A person's decision, sent as an update (validated) or a signal (fire and forget).

    ``call_id`` ``None`` decides every waiting call. ``arguments`` approves one call with them
    instead of the model's: the workflow checks them against the call's recorded schema and
    refuses the update when they do not fit (nothing is decided).
    """

    approved: bool
    call_id: str | None = None
    reason: str | None = None
    arguments: dict[str, Any] | None = None


@dataclass(kw_only=True)
class DecisionOutcome:
    """What an update decided."""

    decided: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class SessionView:
    """A session's state for queries and listings: its status is the session's own
    (``awaiting_approval`` while it waits for a person)."""

    session_id: str
    status: SessionStatus
    reason: str = ""
    question: str = ""
    steps: int = 0
    final_answer: str | None = None
    pending: list[PendingApproval] = field(default_factory=list)
    runs: int = 1


@dataclass(kw_only=True)
class EventPage:
    """Events of the workflow's current run from index ``start`` on, for clients that follow.

    ``records`` are :func:`~miniagent.temporal.events.event_record` forms of typed events;
    ``next`` is the index to ask for next; ``runs`` tells which run of the workflow they belong
    to (continue-as-new starts counting again).
    """

    view: SessionView
    records: list[dict[str, Any]] = field(default_factory=list)
    start: int = 0
    next: int = 0
    runs: int = 1

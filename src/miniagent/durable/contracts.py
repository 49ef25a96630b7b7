"""What travels between a client, the session workflow and its activities.

Plain keyword-only dataclasses, carried by Temporal's pydantic data converter (see
:mod:`miniagent.durable.converter`). Nothing here reads a clock or makes an id, so building one
inside workflow code is safe; every field has a default or is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from miniagent import defaults
from miniagent.runtime.approvals import InterruptedPolicy
from miniagent.runtime.compress import Compression
from miniagent.session import AgentSession
from miniagent.types import Decision, PendingApproval, SessionStatus, Step, ToolCall, ToolMode

ApprovalRule = Literal["never", "always", "predicate"]
"""How a tool's ``requires_approval`` travels: a predicate cannot leave the worker, so the
workflow treats it as ``always`` (a person is asked whenever the predicate might say yes)."""


@dataclass(kw_only=True)
class ToolInfo:
    """One tool as the workflow sees it: what the model is told, and how calls are judged."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)
    idempotent: bool = False
    approval: ApprovalRule = "never"
    timeout: float | None = None
    """The tool's own timeout, seconds (the registry's default when it sets none)."""


@dataclass(kw_only=True)
class WorkerProfile:
    """What a worker offers: its tools, and what its model is configured for."""

    tools: list[ToolInfo] = field(default_factory=list)
    tool_mode: ToolMode = "auto"
    native_tools: bool | None = None


@dataclass(kw_only=True)
class AgentSettings:
    """An agent's configuration, as the workflow needs it (its model and tools stay in the
    worker)."""

    tool_mode: ToolMode | None = None
    """The protocol family; ``None``: what the worker's model is configured for."""
    native_tools: bool | None = None
    grammar: bool = True
    instructions: str | None = None
    max_steps: int = defaults.MAX_STEPS
    token_budget: int | None = None
    timeout: float | None = None
    max_observation_chars: int = defaults.MAX_OBSERVATION_CHARS
    repeat_limit: int = defaults.REPEAT_LIMIT
    max_calls_per_step: int = defaults.MAX_CALLS_PER_STEP
    tool_concurrency: int = defaults.TOOL_CONCURRENCY
    temperature: float | None = defaults.TEMPERATURE
    max_tokens: int | None = defaults.MAX_TOKENS
    on_interrupted: InterruptedPolicy = "ask"
    tool_selection: int | None = None
    """Offer each model request only this many tools (see :mod:`miniagent.runtime.selection`)."""
    compression: Compression | None = None
    """Context compression (see :mod:`miniagent.runtime.compress`); ``None``: off."""
    tool_choice: str | None = None
    """auto, required, none or a tool's name (see :mod:`miniagent.protocol.tool_choice`)."""
    approval_timeout: float | None = None
    """Seconds to wait for a person; past it the waiting calls are denied (the model is told).
    ``None``: wait as long as it takes."""
    model_timeout: float = 120.0
    """Start-to-close timeout of one model call, seconds."""
    heartbeat_timeout: float = 10.0
    """Seconds without a heartbeat after which a tool's worker counts as dead."""
    model_attempts: int = 5
    """Attempts of one model call, for the errors retrying can fix."""
    rollover_bytes: int = 4 * 1024 * 1024
    """Continue as new once the workflow's history is this large (or Temporal suggests it)."""


@dataclass(kw_only=True)
class SessionInput:
    """The workflow's input: a new session, or one carried over by continue-as-new."""

    session: AgentSession
    settings: AgentSettings = field(default_factory=AgentSettings)
    profile: WorkerProfile | None = None
    """The worker's tools and model profile, asked once per session (``None``: not yet)."""
    runs: int = 1
    """Which run of the workflow this is (continue-as-new starts the next)."""


@dataclass(kw_only=True)
class ToolInput:
    """One tool call for the tool activity."""

    call: ToolCall
    session_id: str
    step: int
    metadata: dict[str, Any] = field(default_factory=dict)
    max_observation_chars: int = defaults.MAX_OBSERVATION_CHARS
    decision: Decision | None = None
    """A person's decision on what the call's sub-run waits for (agents as tools)."""


@dataclass(kw_only=True)
class DecisionInput:
    """A person's decision, sent as an update (validated) or a signal (fire and forget).

    ``call_id`` ``None`` decides every waiting call.
    """

    approved: bool
    call_id: str | None = None
    reason: str | None = None


@dataclass(kw_only=True)
class DecisionOutcome:
    """What an update decided."""

    decided: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class SessionView:
    """A session's state for queries and listings (``status`` is ``awaiting_approval`` while
    the workflow waits for a person)."""

    session_id: str
    status: SessionStatus
    reason: str = ""
    question: str = ""
    steps: int = 0
    final_answer: str | None = None
    pending: list[PendingApproval] = field(default_factory=list)
    runs: int = 1


@dataclass(kw_only=True)
class Progress:
    """The steps after a given index, for following a session live."""

    view: SessionView
    steps: list[Step] = field(default_factory=list)

"""What a driver implements: :class:`Effects`, and nothing else.

The step logic (:mod:`miniagent.core.runtime.loop`) and the run shell
(:mod:`miniagent.core.runtime.run`) do no I/O, read no clock and draw no random number: every
such thing is an effect. A driver (in process: :mod:`miniagent.core.runtime.inprocess`; on
Temporal: the session workflow; in tests: a fake) performs them where it keeps the session, and
is done.

An effect either returns or raises one of two things:

- a :class:`~miniagent.core.errors.RunInterrupted`
  (:class:`~miniagent.core.errors.ToolInterrupted` from ``run_tool``,
  :class:`~miniagent.core.errors.Rollover` from ``checkpoint``), whose handling the run shell
  documents;
- a :class:`~miniagent.core.errors.RunFailure` (a model that failed after its retries, a store
  that refused a checkpoint, a payload over a limit), which ends the run with status ``error``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from miniagent.core.session import AgentSession
from miniagent.core.types import (
    CallRecord,
    Decision,
    ModelRequest,
    ModelResponse,
    Observation,
    PendingApproval,
    ToolCall,
    ToolContext,
)

if TYPE_CHECKING:
    from miniagent.core.runtime import events as ev

__all__ = ["Effects"]


class Effects(Protocol):
    """Everything the step logic cannot do itself."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """One model call; raises ModelError when the transport fails after its retries."""
        ...

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        """Run one call in the source that owns the tool, with ``context`` installed for
        :func:`~miniagent.core.types.tool_context`; an observation, or ToolInterrupted."""
        ...

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        """Save the session (or nothing, where history is the checkpoint). With ``call``, what
        changed since the last checkpoint is that one call's completion."""
        ...

    async def wait_for_decision(self, pending: list[PendingApproval], until: float | None
                                ) -> dict[str, Decision]:
        """Decisions for some of these calls, by call id, given by ``until`` at the latest (a
        time of :meth:`now`; ``None``: no limit); the others keep waiting (the run then stops
        with status ``awaiting_approval``, or they are denied once ``until`` has passed)."""
        ...

    def now(self) -> float:
        """The time, in seconds since the epoch."""
        ...

    def new_id(self) -> str:
        """A fresh id (hex), unique within the session."""
        ...

    @property
    def observed(self) -> bool:
        """Whether anyone receives events (when not, none is built)."""
        ...

    def emit(self, event: ev.Event) -> None:
        """Deliver an event to subscribers; must not block."""
        ...

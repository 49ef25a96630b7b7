"""How a tool call ends: recorded ``completed`` with its observation, or waiting for a person.

Plain functions over a step's :class:`~miniagent.core.types.CallRecord`; every state move goes
through :meth:`CallRecord.move <miniagent.core.types.CallRecord.move>`, checked against
:data:`~miniagent.core.types.CALL_MOVES`. Times are given by the caller.
"""

from __future__ import annotations

from miniagent.core.runtime.guards import truncate_observation
from miniagent.core.runtime.subruns import new_usage, waiting_note
from miniagent.core.session import AgentSession
from miniagent.core.types import CallRecord, Observation, TokenUsage, ToolCall

__all__ = ["answered", "record_late", "record_outcome"]


def answered(call: ToolCall, text: str, reason: str, *, at: float) -> CallRecord:
    """A call that is not run (cut off, or repeated): completed at once, with the error
    ``text`` as its observation."""
    record = CallRecord(call=call, observation=Observation(
        call_id=call.id, tool_name=call.name, output=text, is_error=True))
    record.move("completed", reason, at)
    return record


def record_outcome(record: CallRecord, observation: Observation, *, at: float) -> TokenUsage:
    """Record what a run call returned: ``completed``, or ``awaiting_approval`` when it was an
    agent whose sub-run waits for a person (see :mod:`miniagent.core.runtime.subruns`).

    Returns:
        What a sub-run used since the call's last attempt (nothing for other tools), for the
        session's usage.
    """
    previous = record.observation.sub_run if record.observation is not None else None
    record.observation = observation
    sub = observation.sub_run
    if sub is None:
        record.move("completed", "the tool returned", at)
        return TokenUsage()
    usage = new_usage(sub.usage, previous.usage if previous is not None else None)
    if sub.status == "awaiting_approval" and sub.pending:
        record.note = waiting_note(sub)
        record.move("awaiting_approval", record.note, at)
    else:
        record.move("completed", f"the agent {sub.agent!r} ended: {sub.status}", at)
    return usage


def record_late(session: AgentSession, call_id: str, observation: Observation, *,
                max_chars: int, at: float) -> bool:
    """Record the result of a call that came after its run stopped waiting (it was left
    ``started``), as the run would have: cut to ``max_chars``, ``completed``. False when that
    call is not ``started`` (unknown here, or decided since)."""
    for step in reversed(session.steps):
        for record in step.calls:
            if record.call.id != call_id:
                continue
            if record.state != "started":
                return False
            observation.output = truncate_observation(observation.output, max_chars)
            session.add_usage(record_outcome(record, observation, at=at))
            step.tool_time = max(step.tool_time, observation.elapsed)
            return True
    return False

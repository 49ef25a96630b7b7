"""Decisions on calls that wait for a person, and recovery of calls a crash interrupted.

Plain functions over a session; the time of each decision is given by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from miniagent.core.errors import DecisionError
from miniagent.core.runtime.subruns import relay_decision
from miniagent.core.session import AgentSession
from miniagent.core.types import CallRecord, Observation, PendingApproval

Approver = Callable[[PendingApproval], bool | None]
"""Asked inline for each waiting call: True approves, False denies, None leaves it waiting."""

InterruptedPolicy = Literal["ask", "rerun", "fail"]
"""What to do on resume with a non-idempotent call that started but never completed."""

INTERRUPTED_NOTE = (
    "this call started before the process stopped and never completed, so its outcome is "
    "unknown; approve to run it again, or deny to tell the model it failed"
)


def decide(session: AgentSession, call_id: str | None, approved: bool, reason: str | None, *,
           at: float) -> None:
    """Approve or deny one waiting call (or all of them when ``call_id`` is None).

    Raises:
        DecisionError: the session is not waiting, or no waiting call has that id.
    """
    if session.status != "awaiting_approval":
        raise DecisionError(f"session {session.id} is not awaiting approval (status: "
                            f"{session.status})")
    waiting = [r for r in session.open_calls() if r.state == "awaiting_approval"]
    chosen = [r for r in waiting if call_id is None or r.call.id == call_id]
    if not chosen and call_id is None:  # every call was decided already
        decided = ", ".join(f"{r.call.id} {r.state}" for r in session.open_calls()) or "none"
        raise DecisionError(f"session {session.id} has no call awaiting approval (decided: "
                            f"{decided}); resume it to go on")
    if not chosen:
        ids = ", ".join(r.call.id for r in waiting) or "none"
        raise DecisionError(f"session {session.id} has no call {call_id!r} awaiting approval "
                            f"(waiting: {ids})")
    for record in chosen:
        apply_decision(record, approved, reason, at=at)


def apply_decision(record: CallRecord, approved: bool, reason: str | None, *, at: float) -> None:
    """Record a person's decision on one waiting call (relayed, when it waits for a sub-run)."""
    if relay_decision(record, approved, reason, at=at):
        return
    record.move("approved" if approved else "denied", reason or "decided by a person", at)
    record.note = reason


def denial(record: CallRecord) -> Observation:
    """The observation a denied call gets, so the model can adapt."""
    note = (record.note or "").strip()
    why = f" Reason: {note}{'' if note.endswith(('.', '!', '?')) else '.'}" if note else ""
    if record.interrupted:
        text = (f"The call of '{record.call.name}' was interrupted before it completed and was "
                f"not run again; its outcome is unknown.{why}")
    else:
        text = (f"A person denied this call of '{record.call.name}'; it was not run.{why} "
                "Do not retry it unchanged; continue without it or ask for something else.")
    return Observation(call_id=record.call.id, tool_name=record.call.name, output=text,
                       is_error=True)


def recover_interrupted(
    session: AgentSession, is_idempotent: Callable[[str], bool], policy: InterruptedPolicy,
    *, at: float,
) -> None:
    """Calls left ``started`` by a crash: rerun idempotent ones, otherwise apply ``policy``."""
    for record in session.open_calls():
        if record.state != "started":
            continue
        record.interrupted = True
        if policy == "rerun" or is_idempotent(record.call.name):
            record.move("ready", "interrupted by a crash; safe to run again", at)
        elif policy == "fail":
            record.move("denied", "interrupted by a crash; the policy is not to rerun it", at)
            record.note = "the developer's policy is not to rerun it"
        else:
            record.move("awaiting_approval", "interrupted by a crash; a person decides", at)
            record.note = INTERRUPTED_NOTE

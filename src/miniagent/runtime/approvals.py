"""Decisions on calls that wait for a person, and recovery of calls a crash interrupted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from miniagent.errors import SessionError
from miniagent.runtime.session import AgentSession
from miniagent.store.base import CheckpointStore, new_owner
from miniagent.types import CallRecord, Observation, PendingApproval

Approver = Callable[[PendingApproval], bool | None]
"""Asked inline for each waiting call: True approves, False denies, None leaves it waiting."""

InterruptedPolicy = Literal["ask", "rerun", "fail"]
"""What to do on resume with a non-idempotent call that started but never completed."""

INTERRUPTED_NOTE = (
    "this call started before the process stopped and never completed, so its outcome is "
    "unknown; approve to run it again, or deny to tell the model it failed"
)


def decide(session: AgentSession, call_id: str | None, approved: bool, reason: str | None) -> None:
    """Approve or deny one waiting call (or all of them when ``call_id`` is None)."""
    if session.status != "awaiting_approval":
        raise SessionError(f"session {session.id} is not awaiting approval (status: "
                           f"{session.status})")
    waiting = [r for r in session.open_calls() if r.state == "awaiting_approval"]
    chosen = [r for r in waiting if call_id is None or r.call.id == call_id]
    if not chosen:
        ids = ", ".join(r.call.id for r in waiting) or "none"
        raise SessionError(f"session {session.id} has no call {call_id!r} awaiting approval "
                           f"(waiting: {ids})")
    for record in chosen:
        record.state = "approved" if approved else "denied"
        record.note = reason


def cancel(store: CheckpointStore, session_id: str, reason: str) -> None:
    """End a session that no live process is running; it cannot be resumed afterwards."""
    owner = new_owner()
    store.acquire(session_id, owner)
    try:
        store.update(session_id, lambda s: s.transition("cancelled", reason), owner=owner)
    finally:
        store.release(session_id, owner)


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
    session: AgentSession, is_idempotent: Callable[[str], bool], policy: InterruptedPolicy
) -> None:
    """Calls left ``started`` by a crash: rerun idempotent ones, otherwise apply ``policy``."""
    for record in session.open_calls():
        if record.state != "started":
            continue
        record.interrupted = True
        if policy == "rerun" or is_idempotent(record.call.name):
            record.state = "ready"
        elif policy == "fail":
            record.state, record.note = "denied", "the developer's policy is not to rerun it"
        else:
            record.state, record.note = "awaiting_approval", INTERRUPTED_NOTE

"""Forking a session at a step: a new session whose history is the first ``k`` steps of another.

:func:`fork_session` is plain code over a saved session (no I/O; the new id and the time are
given), so every driver forks the same way; :func:`fork_stored` does it on a checkpoint store.
The parent is read and never written, and no lease is taken on it: a session that a live
process is running forks as its last checkpoint shows it.

What the fork keeps, for ``k`` from 0 to the parent's number of steps:

- its steps ``1..k`` (each with its calls, their moves and observations), the messages up to
  the end of step ``k`` (each step records where its messages begin: ``Step.first_message``),
  the turns begun by then, the compactions made by then, and its metadata (less a sub-agent's
  link to the call that ran it: a fork stands alone);
- not the parent's transitions (they carry no step): the fork's first one says where it came
  from (``forked_from`` keeps the parent's id and ``k``); nor the parent's events or traces,
  which belong to the parent's runs (the fork's first run emits its own).

Its status is where the conversation stood after step ``k``:

- where a turn ended at step ``k``: that turn's status, reason and answer (a completed fork
  takes a next question; one that ended ``error`` or ``timeout`` can be resumed too);
- at the parent's last step: the parent's state, with its open calls as they are: a resume
  settles them as it settles any (:func:`~miniagent.core.session.recover_interrupted`
  for a call that had started); a parent a person cancelled forks as it was before that;
- inside a turn: ``running``, as a run the process left (its turn's usage is what its kept
  steps used): resuming it asks the model for step ``k + 1``.
"""

from __future__ import annotations

import time

from miniagent.core.errors import UserError
from miniagent.core.session import (
    FINAL,
    AgentSession,
    ForkedFrom,
    Transition,
    Turn,
    phase_of_history,
)
from miniagent.core.store.base import CheckpointStore, random_id
from miniagent.core.types import SessionStatus, Step, TokenUsage

__all__ = ["fork_session", "fork_stored"]


def fork_stored(store: CheckpointStore, session_id: str, at_step: int) -> AgentSession:
    """Fork the session ``session_id`` of ``store`` after its step ``at_step``; the fork is
    saved under a new id and returned.

    Raises:
        SessionNotFound: no such session.
        UserError: ``at_step`` is out of range, or inside a turn of a session saved before
            steps recorded their messages.
    """
    parent = store.load(session_id)
    child = fork_session(parent, at_step, id=random_id(), at=time.time())
    store.save(child)
    return child


def fork_session(parent: AgentSession, at_step: int, *, id: str, at: float) -> AgentSession:
    """A new session ``id`` whose history is ``parent``'s first ``at_step`` steps (see the
    module docstring); ``parent`` is left as it is.

    Raises:
        UserError: ``at_step`` is not a step from 0 to the parent's number of steps, or lies
            inside a turn of a session saved before steps recorded their messages.
    """
    total = len(parent.steps)
    if isinstance(at_step, bool) or not isinstance(at_step, int) or not 0 <= at_step <= total:
        raise UserError(f"session {parent.id} has {total} step(s): fork it at a step from 0 "
                        f"to {total}, not {at_step!r}")
    child = AgentSession.from_dict(parent.to_dict())  # a copy: a memory store hands out its own
    kept = [t for t in child.turns if t.first_step < at_step] or child.turns[:1]
    later = child.turns[len(kept)] if len(kept) < len(child.turns) else None
    why = f"forked from session {parent.id} at step {at_step}"
    if later is None and at_step == total:
        end = len(child.messages)
        _as_parent_left_it(child, why)
    elif later is not None and later.first_step == at_step:
        end = later.first_message
        _as_turn_ended(child, kept[-1])
    else:
        end = _message_after(child, at_step)
        _inside_turn(child, kept[-1], at_step, f"{why}; resume it to go on")
    child.id, child.turns, child.steps = id, kept, child.steps[:at_step]
    del child.messages[end:]
    child.compactions = [c for c in child.compactions if c.step <= at_step]
    child.usage = sum((t.usage for t in kept), TokenUsage())
    child.elapsed = sum(t.elapsed for t in kept)
    child.created_at = child.updated_at = at
    from miniagent.core.tools.agent_tool import DEPTH_KEY, PARENT_KEY  # loads hashlib: lazily

    for key in (PARENT_KEY, DEPTH_KEY):
        child.metadata.pop(key, None)
    child.forked_from = ForkedFrom(session_id=parent.id, step=at_step)
    child.transitions = [Transition(at=at, source=parent.status, target=child.status,
                                    reason=why)]
    return child


def _message_after(session: AgentSession, at_step: int) -> int:
    """Where the messages of the step after ``at_step`` begin (inside a turn)."""
    if at_step == 0:
        return 1  # the first question alone
    begins = session.steps[at_step].first_message
    if begins is None:
        ends = sorted({t.first_step for t in session.turns[1:]} | {len(session.steps)})
        raise UserError(f"session {session.id} was saved before miniagent recorded where each "
                        "step's messages begin: it forks only where a turn ends (at step "
                        f"{', '.join(map(str, ends))}), or at 0")
    return begins


def _as_parent_left_it(session: AgentSession, why: str) -> None:
    """The parent's last state; a cancelled one as it was before a person cancelled it."""
    if session.status != "cancelled":
        return
    before: SessionStatus = next((t.source for t in reversed(session.transitions)
                                  if t.target == "cancelled"), "running")
    session.status = session.turn.status = before
    session.reason = session.turn.reason = f"{why}, which a person had cancelled"
    session.final_answer = session.turn.final_answer = None
    session.phase = phase_of_history(session)


def _as_turn_ended(session: AgentSession, turn: Turn) -> None:
    """The state ``turn`` ended in (a later turn followed it in the parent)."""
    session.status, session.reason = turn.status, turn.reason
    session.final_answer = turn.final_answer
    session.phase = "done" if turn.status in FINAL else "model"


def _inside_turn(session: AgentSession, turn: Turn, at_step: int, reason: str) -> None:
    """``turn`` cut after step ``at_step``: running, and counting what its kept steps used."""
    steps = session.steps[turn.first_step:at_step]
    turn.usage = sum((_used(s) for s in steps), TokenUsage()) + sum(
        (c.usage for c in session.compactions if turn.first_step < c.step <= at_step),
        TokenUsage())
    turn.elapsed = sum(s.model_time + s.tool_time for s in steps)
    turn.status, turn.reason, turn.final_answer = "running", reason, None
    session.status, session.reason, session.final_answer = "running", reason, None
    session.phase = "model"


def _used(step: Step) -> TokenUsage:
    """What a step used: its model call, and the sub-runs of the agents it called."""
    subs = (r.observation.sub_run for r in step.calls if r.observation is not None)
    return sum((sub.usage for sub in subs if sub is not None), step.usage)

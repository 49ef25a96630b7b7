"""Call records: how a tool call ends, a person's decisions on it, and agents used as tools.

Plain functions over a step's :class:`~miniagent.core.types.CallRecord`; every state move goes
through :meth:`CallRecord.move <miniagent.core.types.CallRecord.move>`, checked against
:data:`~miniagent.core.types.CALL_MOVES`. Times are given by the caller: the step logic imports
this module, so it does no I/O.

- **Outcomes**: a call is recorded ``completed`` with its observation (:func:`record_outcome`),
  answered at once when it is not run (:func:`answered`), or completed late, after its run
  stopped waiting (:func:`record_late`).
- **Approvals**: a person approves or denies a waiting call (:func:`decide`), maybe approving
  it with other arguments (checked first: the edits section below); a denied call
  gets an observation that says so (:func:`denial`); a call a crash interrupted is rerun,
  denied or put to a person (:func:`recover_interrupted`).
- **Sub-runs**: an agent used as a tool (:class:`~miniagent.core.tools.agent_tool.AgentTool`)
  returns an observation carrying a :class:`~miniagent.core.types.SubRun`. Three things follow
  in the parent (the first two when the call is recorded, :func:`record_outcome`): the
  sub-run's tokens join the parent's totals (only what is new since the call's last attempt: a
  resumed sub-run reports its session's whole usage again, :func:`new_usage`); a sub-run that
  stops to wait for a person makes the parent's call wait too (``started ->
  awaiting_approval``), with a pending approval whose reason names the sub-run's waiting calls;
  and the person's decision on that call is not the parent's to apply: it moves the call to
  ``approved`` (the agent tool must run again) and is recorded in the sub-run
  (:func:`relay_decision`), which :func:`relayed_decision` hands to the tool through its
  :class:`~miniagent.core.types.ToolContext`. The tool applies it to the sub-run's waiting
  calls and resumes the sub-run: a denied call is then the sub-agent's to work around.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from miniagent.core.errors import DecisionError
from miniagent.core.runtime.guards import truncate_observation
from miniagent.core.session import AgentSession
from miniagent.core.types import (
    CallRecord,
    Decision,
    Observation,
    PendingApproval,
    SubRun,
    TokenUsage,
    ToolCall,
    ToolLike,
    replaced,
)

__all__ = ["INTERRUPTED_NOTE", "Approver", "InterruptedPolicy", "answered", "apply_decision",
           "call_to_run", "check_edit", "decide", "denial", "edit_note", "new_usage",
           "parameters_of", "record_late", "record_outcome", "recover_interrupted",
           "relay_decision", "relayed_decision", "waiting_note", "with_edit_note"]


# -- outcomes ----------------------------------------------------------------------------------

def answered(call: ToolCall, text: str, reason: str, *, at: float) -> CallRecord:
    """A call that is not run (cut off, or repeated): completed at once, with the error
    ``text`` as its observation."""
    record = CallRecord(call=call, observation=Observation(
        call_id=call.id, tool_name=call.name, output=text, is_error=True))
    record.move("completed", reason, at)
    return record


def record_outcome(record: CallRecord, observation: Observation, *, at: float) -> TokenUsage:
    """Record what a run call returned: ``completed``, or ``awaiting_approval`` when it was an
    agent whose sub-run waits for a person (see the module docstring).

    Returns:
        What a sub-run used since the call's last attempt (nothing for other tools), for the
        session's usage.
    """
    previous = record.observation.sub_run if record.observation is not None else None
    observation.output = with_edit_note(record, observation.output)
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


# -- approvals ---------------------------------------------------------------------------------

Approver = Callable[[PendingApproval], bool | None]
"""Asked inline for each waiting call: True approves, False denies, None leaves it waiting."""

InterruptedPolicy = Literal["ask", "rerun", "fail"]
"""What to do on resume with a non-idempotent call that started but never completed."""

INTERRUPTED_NOTE = (
    "this call started before the process stopped and never completed, so its outcome is "
    "unknown; approve to run it again, or deny to tell the model it failed"
)


def decide(session: AgentSession, call_id: str | None, approved: bool, reason: str | None, *,
           at: float, arguments: dict[str, Any] | None = None) -> None:
    """Approve or deny one waiting call (or all of them when ``call_id`` is None).

    ``arguments`` approves the call with them instead of the model's (one call: ``call_id``,
    or the only one waiting); they are checked against the tool's recorded schema first.

    Raises:
        DecisionError: the session is not waiting, no waiting call has that id, or the edited
            arguments are refused (then nothing is decided).
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
    edited = None if arguments is None else _edit(chosen, approved, arguments)
    for record in chosen:
        apply_decision(record, approved, reason, at=at, arguments=edited)


def _edit(chosen: list[CallRecord], approved: bool, arguments: dict[str, Any]
          ) -> dict[str, Any] | None:
    """The checked edit of the one call chosen (None: the model's own arguments)."""
    if not approved:
        raise DecisionError("edited arguments go with an approval, not a denial")
    if len(chosen) != 1:
        ids = ", ".join(r.call.id for r in chosen)
        raise DecisionError(f"edited arguments are for one call: name it (waiting: {ids})")
    return check_edit(chosen[0], arguments)


def apply_decision(record: CallRecord, approved: bool, reason: str | None, *, at: float,
                   arguments: dict[str, Any] | None = None) -> None:
    """Record a person's decision on one waiting call (relayed, when it waits for a sub-run);
    ``arguments``, checked already, are the person's edit of an approved call."""
    if relay_decision(record, approved, reason, at=at):
        return
    edited = approved and arguments is not None
    why = reason or "decided by a person"
    record.move("approved" if approved else "denied",
                f"{why} (with edited arguments)" if edited else why, at)
    record.note = reason
    if edited:
        record.edited_arguments = arguments


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


# -- sub-runs ----------------------------------------------------------------------------------

def new_usage(total: TokenUsage, counted: TokenUsage | None) -> TokenUsage:
    """What a sub-run used beyond what was counted at the call's last attempt."""
    if counted is None:
        return total
    if not (total.known and counted.known):  # unknown: what is new is estimated too
        return TokenUsage.unknown(
            estimated=max(0, total.counted_tokens - counted.counted_tokens))
    return TokenUsage(
        prompt_tokens=_less(total.prompt_tokens, counted.prompt_tokens),
        completion_tokens=_less(total.completion_tokens, counted.completion_tokens),
        cached_tokens=_less(total.cached_tokens, counted.cached_tokens),
    )


def _less(total: int | None, counted: int | None) -> int:
    return max(0, (total or 0) - (counted or 0))


def waiting_note(sub: SubRun) -> str:
    """Why the parent's call waits: the sub-run's calls a person must decide."""
    calls = "; ".join(
        f"{item.tool} {json.dumps(item.arguments, ensure_ascii=False)}"
        + (f" ({item.reason})" if item.reason else "")
        for item in sub.pending)
    return (f"the agent {sub.agent!r} (session {sub.session_id}) waits for approval of: "
            f"{calls}; the decision is relayed to it")


def relay_decision(record: CallRecord, approved: bool, reason: str | None, *,
                   at: float) -> bool:
    """Take a person's decision on a call that waits for its sub-run; False for other calls.

    The call goes ``approved`` either way, so that the agent tool runs again and hands the
    decision to the sub-run.
    """
    sub = record.observation.sub_run if record.observation is not None else None
    if sub is None or sub.status != "awaiting_approval":
        return False
    verdict = "approved" if approved else "denied"
    record.move("approved", f"{verdict} for the agent {sub.agent!r}: "
                f"{reason or 'decided by a person'}; relayed to its session", at)
    record.note = reason
    sub.decision = Decision(approved=approved, reason=reason)
    return True


def relayed_decision(record: CallRecord) -> Decision | None:
    """The decision to hand to the sub-run of this call when it runs again, if any."""
    sub = record.observation.sub_run if record.observation is not None else None
    return sub.decision if sub is not None else None


# -- a person's edits of a call's arguments ------------------------------------------------------
# Approval with edits: a person approves a waiting call with other arguments than the model's.
#
# The call's record keeps both: ``call`` as the model asked for it, ``edited_arguments`` as the
# person wrote them. An edit is checked before anything is decided (:func:`check_edit`) against
# the JSON Schema recorded on the call when it was put to a person (``CallRecord.parameters``,
# :func:`parameters_of`), with :mod:`jsonschema` as the schema is written (required names,
# unknown names where the schema closes the object, types: a person's JSON is not coerced the
# lax way a model's arguments are). So a store, the inbox and a Temporal workflow check an edit
# the same way, none of them with the tool at hand. The tool then runs with the person's
# arguments (:func:`call_to_run`), and the model's observation begins with a note that says so
# (:func:`with_edit_note`).
#
# Part of the step logic, as the rest of this module: no I/O.

_LISTED = 5
"""The most problems a refusal lists."""


def parameters_of(tools: Sequence[ToolLike], name: str) -> dict[str, Any] | None:
    """The JSON Schema of the arguments of the tool ``name`` among ``tools`` (None: unknown)."""
    for tool in tools:
        if tool.name == name:
            return dict(tool.parameters)
    return None


def check_edit(record: CallRecord, arguments: Any) -> dict[str, Any] | None:
    """The person's ``arguments`` for the waiting call ``record``, as they are to be recorded;
    None when they are the model's own (then it is a plain approval).

    Raises:
        DecisionError: they are not an object, the call waits for a sub-run (whose own calls
            are edited in its session), no schema was recorded for it, or the schema refuses
            them (the message lists what is wrong).
    """
    call_id, name = record.call.id, record.call.name
    if not isinstance(arguments, dict):
        raise DecisionError(f"the arguments for call {call_id} must be a JSON object, not "
                            f"{type(arguments).__name__}")
    if arguments == record.call.arguments:
        return None
    sub = record.observation.sub_run if record.observation is not None else None
    if sub is not None:
        raise DecisionError(f"call {call_id} waits for calls of the agent {sub.agent!r}: its "
                            "arguments cannot be edited here; approve or deny it as it is")
    if record.parameters is None:
        raise DecisionError(f"call {call_id} has no recorded schema for the arguments of "
                            f"{name!r} (it was saved by an older miniagent): approve it as it "
                            "is, or deny it")
    problems = _problems(record.parameters, arguments)
    if problems:
        raise DecisionError(f"the edited arguments for call {call_id} ({name!r}) do not fit "
                            f"its schema, nothing was decided: {problems}")
    return dict(arguments)


def _problems(schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    """What is wrong with ``arguments`` for ``schema``, in words ("" when nothing is)."""
    import jsonschema  # loaded by the first edit: ``import miniagent`` does not load it
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(arguments))
    except Exception as exc:  # an invalid or damaged schema (it was read from a session)
        return f"the recorded schema cannot be checked ({type(exc).__name__})"
    found = [f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: "
             f"{_shorten(e.message)}" for e in errors]
    more = f"; and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
    return "; ".join(found[:_LISTED]) + more


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_to_run(record: CallRecord) -> ToolCall:
    """The call as it runs: the model's, or with the person's arguments."""
    edited = record.edited_arguments
    if edited is None:
        return record.call
    return replaced(record.call, arguments=dict(edited), arguments_error=None,
                    raw_arguments=json.dumps(edited, ensure_ascii=False))


def edit_note(record: CallRecord) -> str:
    """What the model is told before the result of a call a person edited ("" for others)."""
    if record.edited_arguments is None:
        return ""
    edited = json.dumps(record.edited_arguments, ensure_ascii=False)
    return (f"[A person approved this call with changed arguments; it ran with {edited}, "
            "not with the arguments you gave.]\n")


def with_edit_note(record: CallRecord, output: str) -> str:
    """``output`` of the call ``record``, after the note of its edit if it was edited."""
    return edit_note(record) + output

"""AgentSession: the state of one run, as an explicit, persisted state machine, and its calls'.

::

    running ──► completed | max_steps | budget_exceeded | loop_detected   (final)
       │    ──► timeout | error                                          (resumable)
       │    ──► awaiting_approval ──► running  (after approve / deny, on resume)
       └──────────────┴─────────────► cancelled                          (final)

Every transition goes through :meth:`AgentSession.transition`, which checks it against
``ALLOWED`` and records it with the time it is given and a reason. ``phase`` says where the
session goes on (``model``: it needs a model call; ``tools``: its last step has calls to run or
to decide; ``done``); it moves through :meth:`AgentSession.move_to`, checked against
``PHASE_MOVES`` (and to ``done`` with a final status). A session waiting for a person is
``awaiting_approval`` on every driver, while it waits. ``messages`` only ever grows; a
compaction (``compactions``) changes what the model is sent, not the messages.

A session is a conversation of one or more turns (``turns``): each is a user question and the
run that answers it. :meth:`AgentSession.new_turn` begins the next one on a session whose last
turn ended (``TURN_ENDED``, no calls left open): the history goes on from where it stopped, so
the next request starts with the bytes of the last one. Steps, tokens and the guards count per
turn (:attr:`AgentSession.turn`); ``usage`` keeps the session's total.

This module reads no clock and makes no id: both come from whoever drives the session, so the
same inputs give the same saved session, byte for byte.

What a session keeps is valid Unicode: one definition of "storable" (:func:`storable`), used at
every boundary where text comes in (a question, a reply, a tool's result, a stored row).

**Its calls.** How a tool call ends, a person's decisions on it, and agents used as tools are
plain functions over a step's :class:`~miniagent.core.types.CallRecord`; every state move goes
through :meth:`CallRecord.move <miniagent.core.types.CallRecord.move>`, checked against
:data:`~miniagent.core.types.CALL_MOVES`. As for the session, times are given by the caller.

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
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from miniagent.core.errors import (
    DecisionError,
    SessionError,
    SessionVersionError,
    StoreCorrupted,
    TurnRefused,
)
from miniagent.core.types import (
    CallRecord,
    Compaction,
    Decision,
    Message,
    Observation,
    PendingApproval,
    Phase,
    RunResult,
    SessionStatus,
    Step,
    SubRun,
    TokenUsage,
    ToolCall,
    ToolLike,
    replaced,
)

SCHEMA_VERSION = 8
"""Version 2 added ``phase`` and each call's recorded ``moves``, version 3 ``compactions`` and
each message's ``reasoning``, version 4 usage the server did not report (token counts of None,
``estimated_tokens``), version 5 ``turns``, version 6 each observation's ``attempts`` and
``retryable`` (tool retries), version 7 each step's ``model`` (which model answered it) and
``first_message``, each call's ``edited_arguments`` and ``parameters`` (approval with edits) and
the session's ``forked_from``, version 8 each turn's ``output_schema`` (a typed result asked
for that run alone); versions 1 to 7 still load (1 to 4 as one turn; observations of 1 to 5 as
made in one attempt; steps of 1 to 6 with no model named and without their first message, so
such a session forks only where a turn ends; their calls unedited, with no schema recorded;
turns of 1 to 7 with no schema of their own)."""

FINAL: frozenset[SessionStatus] = frozenset(
    {"completed", "max_steps", "budget_exceeded", "loop_detected", "cancelled"}
)
PHASE_MOVES: dict[Phase, frozenset[Phase]] = {
    "model": frozenset({"tools"}),  # the reply asked for tools
    "tools": frozenset({"model"}),  # every call's observation is in the history
    "done": frozenset(),
}
ALLOWED: dict[SessionStatus, frozenset[SessionStatus]] = {
    "running": frozenset({
        "completed", "max_steps", "budget_exceeded", "loop_detected", "timeout", "error",
        "awaiting_approval", "cancelled",
    }),
    "awaiting_approval": frozenset({"running", "cancelled"}),
    "timeout": frozenset({"running", "cancelled"}),
    "error": frozenset({"running", "cancelled"}),
}
TURN_ENDED: frozenset[SessionStatus] = frozenset(
    {"completed", "max_steps", "budget_exceeded", "loop_detected", "timeout", "error"}
)
"""The statuses from which a session takes a new turn (with no calls left open)."""


@dataclass(kw_only=True)
class Transition:
    """One recorded change of status."""

    at: float
    source: SessionStatus
    target: SessionStatus
    reason: str


@dataclass(kw_only=True)
class Turn:
    """One question of a conversation and how the run answering it went."""

    question: str
    at: float
    first_step: int = 0
    """Index in the session's ``steps`` of the turn's first step."""
    first_message: int = 0
    """Index in the session's ``messages`` of the turn's question."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    elapsed: float = 0.0
    """Seconds its runs took (the session's ``elapsed`` counts every turn)."""
    status: SessionStatus = "running"
    reason: str = ""
    final_answer: str | None = None
    recalled: str | None = None
    """The memory block recalled for the question before the turn's first step (None: no
    memory was asked); the model sees it with the question."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema this turn's answer must fit, given for its run alone
    (``run(..., output_type=...)``; None: the agent's, if it has one), kept so that a resume
    asks for it too (see :mod:`miniagent.core.runtime.output`)."""


@dataclass(kw_only=True)
class ForkedFrom:
    """Where a forked session came from: its parent session and the step it was forked at
    (see :mod:`miniagent.core.runtime.fork`)."""

    session_id: str
    step: int
    """How many of the parent's steps the fork kept (0: only its first question)."""


@dataclass(kw_only=True)
class AgentSession:
    """Everything one run has accumulated; saved after every step and tool call."""

    question: str
    id: str
    status: SessionStatus = "running"
    phase: Phase = "model"
    reason: str = ""
    final_answer: str | None = None
    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    transitions: list[Transition] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    elapsed: float = 0.0
    compactions: list[Compaction] = field(default_factory=list)
    """Each replacement of the oldest rounds by a summary in what the model is sent
    (``messages`` keeps them all; see :mod:`miniagent.core.runtime.compress`)."""
    turns: list[Turn] = field(default_factory=list)
    """The conversation's turns, the first one's question being ``question``; never empty
    (a session saved before version 5 loads as one turn)."""
    forked_from: ForkedFrom | None = None
    """The session this one is a fork of, and at which step (None: not a fork)."""

    def __post_init__(self) -> None:
        if not self.turns:
            self.turns.append(Turn(question=self.question, at=self.created_at, usage=self.usage,
                                   elapsed=self.elapsed, status=self.status,
                                   reason=self.reason, final_answer=self.final_answer))

    @classmethod
    def start(cls, question: str, *, id: str, at: float,
              metadata: dict[str, Any] | None = None) -> AgentSession:
        """A new session whose history holds the question."""
        session = cls(question=question, id=id, metadata=dict(metadata or {}),
                      created_at=at, updated_at=at)
        session.messages.append(Message(role="user", content=question))
        return session

    @property
    def turn(self) -> Turn:
        """The current (last) turn."""
        return self.turns[-1]

    @property
    def turn_steps(self) -> list[Step]:
        """The steps of the current turn (what its guards count)."""
        return self.steps[self.turns[-1].first_step:]  # read often: no property in between

    def new_turn(self, question: str, *, at: float) -> None:
        """Begin the next turn with the user's ``question``: the history goes on.

        A session still ``running`` here is one whose last run was interrupted (its caller
        holds it): that turn ends ``error``, and the new one begins.

        Raises:
            TurnRefused: the session waits for a person, has calls still open, or was
                cancelled.
        """
        if self.status == "running":
            self.transition("error", "interrupted: a new turn began", at=at)
        if self.status not in TURN_ENDED or self.phase == "tools":
            raise TurnRefused(self._why_no_turn())
        self._answer_unanswered()
        self.turns.append(Turn(question=question, at=at, first_step=len(self.steps),
                               first_message=len(self.messages)))
        self._record("running", f"turn {len(self.turns)}", at)  # checked above
        self.phase, self.final_answer = "model", None
        self.messages.append(Message(role="user", content=question))

    def _answer_unanswered(self) -> None:
        """Calls of the last reply that the ended turn never answered (the loop guard stopped
        it there) get an answer, so that the history stays a valid conversation (servers
        refuse tool calls without their results)."""
        last = next((i for i in range(len(self.messages) - 1, -1, -1)
                     if self.messages[i].role == "assistant"), None)
        if last is None:
            return
        answered = {m.tool_call_id for m in self.messages[last + 1:] if m.role == "tool"}
        for call in self.messages[last].tool_calls:
            if call.id not in answered:
                self.messages.append(Message(
                    role="tool", content=f"Not run: the turn ended ({self.status}).",
                    tool_call_id=call.id, name=call.name))

    def _why_no_turn(self) -> str:
        if self.status == "awaiting_approval":
            return (f"session {self.id} is waiting for approval: approve or deny its calls "
                    "and resume it before asking a new question")
        if self.status == "cancelled":
            return f"session {self.id} was cancelled: start a new session"
        return (f"session {self.id} has calls of its last turn still open ({self.status}): "
                "resume it before asking a new question")

    def add_time(self, seconds: float) -> None:
        """Count ``seconds`` of running in the session's total and in the current turn."""
        self.elapsed += seconds
        self.turns[-1].elapsed += seconds

    def add_usage(self, usage: TokenUsage) -> None:
        """Count ``usage`` in the session's total and in the current turn."""
        if (usage.prompt_tokens == 0 and usage.completion_tokens == 0
                and not usage.cached_tokens and not usage.estimated_tokens):
            return  # nothing used (a plain tool call): both sums stay what they are
        turn = self.turns[-1]
        self.usage, turn.usage = self.usage + usage, turn.usage + usage

    @property
    def done(self) -> bool:
        """True once the loop must stop stepping (any status but running)."""
        return self.status != "running"

    def transition(self, target: SessionStatus, reason: str, *, at: float) -> None:
        """Move to ``target``; raises SessionError for a move the state machine forbids."""
        if target not in ALLOWED.get(self.status, frozenset()):
            raise SessionError(
                f"session {self.id} cannot go from {self.status} to {target} ({reason})"
            )
        self._record(target, reason, at)

    def _record(self, target: SessionStatus, reason: str, at: float) -> None:
        self.transitions.append(Transition(at=at, source=self.status, target=target,
                                           reason=reason))
        self.status, self.reason, self.updated_at = target, reason, at
        turn = self.turns[-1]
        turn.status, turn.reason = target, reason
        if target in FINAL:
            self.phase = "done"

    def move_to(self, phase: Phase) -> None:
        """Go on in ``phase``; raises SessionError for a move the table forbids (a bug)."""
        if phase not in PHASE_MOVES[self.phase]:
            raise SessionError(f"session {self.id} cannot go from phase {self.phase} to {phase}")
        self.phase = phase

    def finish(self, status: SessionStatus, reason: str, final_answer: str | None = None, *,
               at: float) -> None:
        """End the current run with ``status``; ignored when it has already ended."""
        if self.status == "running":
            self.transition(status, reason, at=at)
            self.final_answer = self.turn.final_answer = final_answer

    def open_calls(self) -> list[CallRecord]:
        """Calls of the last step that have no observation yet."""
        if self.phase != "tools" or not self.steps:
            return []
        return [record for record in self.steps[-1].calls if record.state != "completed"]

    def pending_approvals(self) -> list[PendingApproval]:
        return [PendingApproval.of(r) for r in self.open_calls() if r.state == "awaiting_approval"]

    def result(self) -> RunResult:
        """How the current turn's run ended: its steps and usage (``messages`` is the whole
        conversation; ``turn`` counts from 1)."""
        status = self.status if self.status != "running" else "error"
        return RunResult(
            status=status,
            reason=self.reason or "the run ended without a status",
            session_id=self.id,
            final_answer=self.final_answer,
            steps=list(self.turn_steps),
            usage=self.turn.usage,
            turn=len(self.turns),
            messages=list(self.messages),
            elapsed=self.turn.elapsed,
            pending_approvals=self.pending_approvals(),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with ``schema_version``; :meth:`from_dict` reads it back."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentSession:
        """Load a saved session (version 1 to 8); refuses a newer schema with a clear message."""
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise SessionError("saved session has no schema_version: not a miniagent session")
        if version > SCHEMA_VERSION:
            raise SessionVersionError(
                f"session {data.get('id', '?')} was saved with schema_version {version}, but "
                f"this miniagent reads up to {SCHEMA_VERSION}: upgrade miniagent to load it"
            )
        body = {k: v for k, v in data.items() if k != "schema_version"}
        from pydantic import ValidationError

        try:
            session: AgentSession = _adapter().validate_python(body)
        except ValidationError as exc:
            raise StoreCorrupted(
                f"session {data.get('id', '?')} is damaged: {exc.error_count()} invalid "
                f"field(s), first: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
            ) from None
        if version == 1:
            session.phase = phase_of_history(session)
        return session


def phase_of_history(session: AgentSession) -> Phase:
    """The phase a session's status, steps and messages imply (version 1 kept no phase; a
    fork of a cancelled session goes on from before the cancelling): a last step with calls
    still open, or whose observations are not yet in the history (the last message is the
    assistant's), has calls to run or to decide."""
    if session.status in FINAL:
        return "done"
    last = session.steps[-1] if session.steps else None
    if last is None or not last.calls:
        return "model"
    still_open = any(record.state != "completed" for record in last.calls)
    return "tools" if still_open or session.messages[-1].role == "assistant" else "model"


_ADAPTER: Any = None


def _adapter() -> Any:
    global _ADAPTER  # built on first load: pydantic schema building costs ~20 ms
    if _ADAPTER is None:
        from pydantic import TypeAdapter

        _ADAPTER = TypeAdapter(AgentSession)
    return _ADAPTER


# -- a call's outcome ------------------------------------------------------------------------------

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


# -- approvals -------------------------------------------------------------------------------------

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


# -- sub-runs --------------------------------------------------------------------------------------

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


# -- a person's edits of a call's arguments --------------------------------------------------------
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


# -- storable text, observations cut ---------------------------------------------------------------

def storable(text: str) -> str:
    """``text`` as valid Unicode: surrogate pairs joined, lone surrogates replaced by U+FFFD.

    Lone surrogates come from ``surrogateescape``d file names or a model's broken ``\\ud800``
    escape; no UTF-8 store, terminal or JSON output can encode them. Returns ``text`` itself
    when it has none.

    Example:
        >>> storable("caf\\udce9") == "caf\\ufffd"
        True
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def truncate_observation(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters and say so, so the model knows data is missing."""
    if limit <= 0 or len(text) <= limit:
        return text
    removed = len(text) - limit
    return f"{text[:limit]}\n... [truncated {removed:,} of {len(text):,} chars]"

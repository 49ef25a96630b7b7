"""AgentSession: the state of one run, as an explicit, persisted state machine.

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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from miniagent.core.errors import SessionError, SessionVersionError, StoreCorrupted, TurnRefused
from miniagent.core.types import (
    CallRecord,
    Compaction,
    Message,
    PendingApproval,
    Phase,
    RunResult,
    SessionStatus,
    Step,
    TokenUsage,
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


# -- storable text --------------------------------------------------------------------------------

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

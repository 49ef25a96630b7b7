"""Data contracts shared by every part of miniagent.

Everything here is a plain keyword-only dataclass: cheap to build on the hot path,
serialisable with :func:`dataclasses.asdict`, and loadable back with
``pydantic.TypeAdapter(Message).validate_python(data)``.

The saved session itself (:class:`~miniagent.core.session.AgentSession`) lives beside this module
in ``session.py``. Nothing here reads a clock or makes an id: times and ids are given.

The history of a run is a list of :class:`Message` in a protocol-neutral form:
an assistant message carries its raw text and the tool calls parsed from it, and a
``tool`` message carries one observation. Protocols (``protocol/react.py``,
``protocol/native.py``) turn that list into what a server expects.

What a running tool may know about its call is a :class:`ToolContext`, read with
:func:`tool_context`. A tool is a plain function, so it is not handed a context argument; a
side-effecting tool that needs an idempotency key (to make a payment or send a mail at most once
across retries and resumes) reads it there::

    @tool
    def send_mail(to: str, body: str) -> str:
        key = tool_context().idempotency_key   # the same on every attempt of this call

The step logic builds the context (it is pure data); the driver installs it around the call
(:class:`using_context`). In process the key is ``session id:call id``, which a resumed session
keeps; a Temporal worker uses the workflow id and the activity id.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from miniagent._internal import defaults

if TYPE_CHECKING:
    from miniagent.core.retry import RetryPolicy

log = logging.getLogger("miniagent")

Role = Literal["system", "user", "assistant", "tool"]
ToolMode = Literal["react", "native", "hybrid", "auto"]
Phase = Literal["model", "tools", "done"]
"""Where a session goes on: it needs a model call, has calls to run (or to decide), or is over."""
ParseKind = Literal["action", "final", "invalid", "retry"]
"""What a reply is: calls, an answer, neither (the model is told), or ``retry``: the endpoint
ignored part of the request (tools it never showed the model), so the step asks again, rendered
anew, and the reply is not kept."""
RunStatus = Literal[
    "completed", "max_steps", "budget_exceeded", "timeout", "loop_detected", "error",
    "awaiting_approval", "cancelled",
]
SessionStatus = Literal["running", RunStatus]
CallState = Literal["ready", "awaiting_approval", "approved", "denied", "started", "completed"]

CALL_MOVES: dict[CallState, frozenset[CallState]] = {
    "ready": frozenset({"started", "awaiting_approval", "completed"}),
    "awaiting_approval": frozenset({"approved", "denied"}),
    "approved": frozenset({"started"}),
    "denied": frozenset({"completed"}),
    # a crash left the call started: run it again, ask a person, or give up on it
    "started": frozenset({"completed", "ready", "awaiting_approval", "denied"}),
    "completed": frozenset(),
}
"""The moves a tool call may make (:meth:`CallRecord.move`); ``completed`` is final.

::

    ready ──► started ──► completed
      │          ▲  └──► ready | awaiting_approval | denied   (interrupted by a crash)
      ├──► awaiting_approval ──► approved ──┘
      │                    └──► denied ──► completed           (the model is told why)
      └──► completed                                           (answered without running)
"""

CallOutcome = Literal["ran", "denied", "not_run"]
"""How a completed call ended (:attr:`CallRecord.outcome`): its state is ``completed`` in
every case, since each got an observation."""


class ToolLike(Protocol):
    """What protocols need from a tool: a name, a description and a JSON Schema."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...


@dataclass(kw_only=True, slots=True)
class ToolCall:
    """One request of the model to run a tool.

    ``arguments`` is the decoded JSON object. When the raw text was not a JSON object
    (a bare string such as ``Paris``, or JSON that could not be repaired),
    ``arguments`` is empty and the registry decides from ``raw_arguments``;
    ``arguments_error`` then says why decoding failed, if it did.
    """

    id: str
    """Empty until the step logic assigns one when the model sent none."""
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str = ""
    arguments_error: str | None = None


@dataclass(kw_only=True, slots=True)
class Observation:
    """The result of one tool call, as text for the model."""

    call_id: str
    tool_name: str
    output: str
    is_error: bool = False
    elapsed: float = 0.0
    sub_run: SubRun | None = None
    """Set when the tool was another agent (:meth:`~miniagent.core.agent.Agent.as_tool`)."""
    attempts: int = 1
    """How many times the executor ran the call (more than 1 after transient failures, see
    :mod:`miniagent.core.retry`)."""
    retryable: bool = False
    """The failure is transient and trying again cannot repeat an effect (the tool raised
    ``ToolError(..., retryable=True)``, or an idempotent tool met a connection error); set by
    a tool's source, read by the executor."""


@dataclass(kw_only=True, slots=True)
class TokenUsage:
    """Token counts as the server reported them; ``cached_tokens`` is part of ``prompt_tokens``.

    A server that reports no usage (llama.cpp's, streaming) leaves the counts unknown: None,
    never 0 (:meth:`unknown`). ``estimated_tokens`` then holds the step logic's estimate of
    the call's tokens, prompt and completion (see :mod:`miniagent.core.runtime.guards`), which the
    token budget counts instead. A sum with an unknown part is unknown, and its estimate counts
    the reported parts too: ``TokenUsage(prompt_tokens=90, completion_tokens=10) +
    TokenUsage.unknown(estimated=50)`` is unknown with ``estimated_tokens=150``.

    Example:
        >>> usage = TokenUsage(prompt_tokens=90, completion_tokens=10)
        >>> (usage + TokenUsage.unknown(estimated=50)).counted_tokens
        150
        >>> (usage + TokenUsage.unknown(estimated=50)).total_tokens is None
        True
    """

    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    cached_tokens: int | None = 0
    estimated_tokens: int = 0
    """While the counts are unknown: their estimate (0 when known)."""

    @classmethod
    def unknown(cls, estimated: int = 0) -> TokenUsage:
        """The usage of a call whose server reported none."""
        return cls(prompt_tokens=None, completion_tokens=None, cached_tokens=None,
                   estimated_tokens=estimated)

    @property
    def known(self) -> bool:
        """Whether the server reported the counts (every call of a sum)."""
        return self.prompt_tokens is not None and self.completion_tokens is not None

    @property
    def total_tokens(self) -> int | None:
        """Prompt plus completion tokens; None when unknown (see :attr:`counted_tokens`)."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens

    @property
    def counted_tokens(self) -> int:
        """What the token budget counts: the total when known, else the estimate."""
        total = self.total_tokens
        return self.estimated_tokens if total is None else total

    def __add__(self, other: TokenUsage) -> TokenUsage:
        # Counted on every model call and tool call: no property calls, and no None checks
        # (a count is None only when unknown, and None + int raises TypeError).
        try:
            return TokenUsage(
                prompt_tokens=self.prompt_tokens + other.prompt_tokens,  # type: ignore[operator]
                completion_tokens=(self.completion_tokens  # type: ignore[operator]
                                   + other.completion_tokens),
                cached_tokens=(self.cached_tokens or 0) + (other.cached_tokens or 0),
            )
        except TypeError:
            return TokenUsage.unknown(estimated=self.counted_tokens + other.counted_tokens)


@dataclass(kw_only=True, slots=True)
class Message:
    """One entry of the append-only history.

    - ``system`` / ``user``: ``content`` is the text.
    - ``assistant``: ``content`` is what the model wrote (for ReAct, the raw text cut at
      the stop word), ``tool_calls`` what was parsed from it.
    - ``tool``: ``content`` is the observation text for ``tool_call_id``.
    """

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    """The server's ``reasoning_content`` of an assistant tool-call turn, sent back with it."""


@dataclass(kw_only=True, slots=True)
class ModelRequest:
    """What a protocol asks a model for: wire-format messages plus generation settings."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    stop: list[str] | None = None
    temperature: float | None = defaults.TEMPERATURE
    max_tokens: int | None = defaults.MAX_TOKENS
    extra_body: dict[str, Any] = field(default_factory=dict)
    grammar: str | None = None
    """A GBNF grammar for constrained decoding, honoured by backends that support it."""
    protocol: str = ""
    """The name of the protocol that rendered the request (transports ignore it)."""
    tool_choice: str | None = None
    """``auto``, ``required``, ``none`` or a tool's name, sent with ``tools`` (None: ``auto``)."""

    def generation_settings(self) -> dict[str, Any]:
        """The settings given (``temperature``, ``max_tokens``, ``stop``), under their
        OpenAI wire names, in that order; one left unset is left out."""
        settings: dict[str, Any] = {}
        if self.temperature is not None:
            settings["temperature"] = self.temperature
        if self.max_tokens is not None:
            settings["max_tokens"] = self.max_tokens
        if self.stop:
            settings["stop"] = list(self.stop)
        return settings


@dataclass(kw_only=True, slots=True)
class ModelResponse:
    """A model's answer, normalised: text content, native tool calls, usage."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str | None = None
    raw: Any = None
    reasoning_content: str | None = None
    """A reasoning model's thinking, where the server returns it apart from the content."""
    model: str | None = None
    """The name of the model that answered, where a model says it
    (a :class:`~miniagent.FallbackModel` does: the name of the one of its models that answered)."""


@dataclass(kw_only=True, slots=True)
class ParsedOutput:
    """What the protocol made of one model response."""

    kind: ParseKind
    thought: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    final_answer: str | None = None
    error: str | None = None
    text: str = ""  # the assistant text kept in the history (ReAct: cut at the stop word)
    reasoning: str | None = None
    """``reasoning_content`` to keep with the turn (the hybrid protocol replays it)."""
    plain_answer: str | None = None
    """Set on an ``invalid`` reply that is plain prose (none of the protocol's labels: no
    action, no answer label): what it says. The step logic takes it as the final answer where
    the step offered no tools (or no tool may be called), or where the step before it was such
    a reply too and the model was told the format once (a small model answering ``The answer
    is 87.`` keeps doing so)."""


@dataclass(kw_only=True, slots=True)
class CallMove:
    """One recorded move of a tool call's state."""

    at: float
    source: CallState
    target: CallState
    reason: str


@dataclass(kw_only=True, slots=True)
class CallRecord:
    """A tool call and where it stands; persisted so a resumed run never repeats a finished call.

    ``state`` changes only through :meth:`move`, checked against :data:`CALL_MOVES` and
    recorded in ``moves``. ``note`` holds the reason of an approval or denial, or why the call
    waits. ``interrupted`` marks a call that started before a crash and never completed.
    ``call`` stays what the model asked for; a person who approved it with other arguments
    left them in ``edited_arguments`` (see :mod:`miniagent.core.session`).
    """

    call: ToolCall
    state: CallState = "ready"
    observation: Observation | None = None
    note: str | None = None
    interrupted: bool = False
    moves: list[CallMove] = field(default_factory=list)
    edited_arguments: dict[str, Any] | None = None
    """The arguments a person approved the call with, in place of ``call.arguments``; the tool
    ran with these (None: as the model asked)."""
    parameters: dict[str, Any] | None = None
    """The JSON Schema of the tool's arguments, recorded when the call is put to a person, so
    that an edit is checked wherever the decision is made (a store, the inbox, a Temporal
    client), without the tool at hand."""

    def move(self, target: CallState, reason: str, at: float) -> None:
        """Go to ``target``; raises ValueError for a move the table forbids (a bug of ours)."""
        if target not in CALL_MOVES[self.state]:
            raise ValueError(f"call {self.call.id} cannot go from {self.state} to {target}")
        self.moves.append(CallMove(at=at, source=self.state, target=target, reason=reason))
        self.state = target

    @property
    def outcome(self) -> CallOutcome | None:
        """How the call ended, read from its moves (derived, never saved): ``ran`` (its tool
        ran), ``denied`` (a person, or the policy on interrupted calls, refused it: it did not
        run (again), and the model was told why), ``not_run`` (answered without running: cut
        off, or repeated). None while the call is open, and for calls saved without moves
        (schema_version 1)."""
        if self.state != "completed" or not self.moves:
            return None
        targets = {move.target for move in self.moves}
        if "denied" in targets:
            return "denied"
        return "ran" if "started" in targets else "not_run"

    @property
    def succeeded(self) -> bool:
        """Whether the call's tool ran and its result is not an error (derived, never saved)."""
        return (self.outcome == "ran" and self.observation is not None
                and not self.observation.is_error)


@dataclass(kw_only=True, slots=True)
class Decision:
    """A person's decision on one waiting call."""

    approved: bool
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    """An approval with edits: the arguments the call runs with instead of the model's."""


@dataclass(kw_only=True, slots=True)
class PendingApproval:
    """A call waiting for a person's decision."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str = ""

    @classmethod
    def of(cls, record: CallRecord) -> PendingApproval:
        call = record.call
        return cls(call_id=call.id, tool=call.name, arguments=call.arguments,
                   reason=record.note or "")


@dataclass(kw_only=True, slots=True)
class Step:
    """One turn of the loop: a model call and the tools it asked for."""

    index: int
    thought: str | None = None
    raw_output: str | None = None
    calls: list[CallRecord] = field(default_factory=list)
    final_answer: str | None = None
    error: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    model_time: float = 0.0
    tool_time: float = 0.0
    dropped_calls: int = 0
    """Calls of the reply beyond the per-step limit, which were not run."""
    offered_tools: list[str] | None = None
    """The tools this step's request offered, when the agent selects them (``tool_selection``);
    ``None``: every tool."""
    model: str | None = None
    """The model that answered this step, where its model says it (:attr:`ModelResponse.model`:
    which of a :class:`~miniagent.FallbackModel`'s models)."""
    first_message: int | None = None
    """Index in the session's ``messages`` of the first message this step added (its reply);
    what a fork keeps of the history (None: saved before session schema version 7)."""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [record.call for record in self.calls]

    @property
    def observations(self) -> list[Observation]:
        return [record.observation for record in self.calls if record.observation is not None]


@dataclass(kw_only=True, slots=True)
class Compaction:
    """One recorded replacement of the oldest rounds of the history by a summary block.

    The history itself (``AgentSession.messages``) keeps every message; what the model is sent
    from this compaction on is ``messages[:start]``, then ``summary`` as one user message, then
    ``messages[end:]`` (see :mod:`miniagent.core.runtime.compress`). Each compaction covers every
    round before ``end``: the last one alone says what is sent.
    """

    step: int
    """The step whose prompt was the first to use it."""
    at: float
    start: int
    """Index in ``messages`` of the first replaced message (the first round)."""
    end: int
    """Index in ``messages`` of the first message kept whole after the summary."""
    rounds: int
    """How many rounds the summary stands for."""
    summary: str
    mode: Literal["truncate", "model"]
    """Who wrote the summary: cut observations, or the model (``truncate`` also when the
    model's summary failed; ``note`` then says why)."""
    unit: Literal["tokens", "chars"]
    size_before: int
    """The history's size in ``unit`` before the compaction (tokens are estimated)."""
    size_after: int
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Tokens of the summary's model call (``model`` mode)."""
    note: str = ""


@dataclass(kw_only=True, slots=True)
class SubRun:
    """The run of an agent used as a tool, recorded on the observation of the parent's call.

    ``usage`` is the sub-session's total (it is added to the parent's); ``pending`` lists the
    sub-run's calls that wait for a person while ``status`` is ``awaiting_approval``, and
    ``decision`` is the person's decision on them, relayed to the sub-run when it resumes.
    """

    agent: str
    session_id: str
    status: SessionStatus
    reason: str = ""
    depth: int = 1
    final_answer: str | None = None
    steps: list[Step] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    pending: list[PendingApproval] = field(default_factory=list)
    decision: Decision | None = None


@dataclass(kw_only=True, slots=True)
class RunResult:
    """How a run ended. ``status`` is always set; ``reason`` says why in words.

    ``final_answer`` is set when the run completed, and when it reached ``max_steps`` and the
    model then gave its best answer (:attr:`answered_at_limit`)."""

    status: RunStatus
    reason: str
    session_id: str = ""
    final_answer: str | None = None
    steps: list[Step] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    messages: list[Message] = field(default_factory=list)
    elapsed: float = 0.0
    pending_approvals: list[PendingApproval] = field(default_factory=list)
    turn: int = 1
    """Which turn of the session's conversation this run answered (``steps`` and ``usage``
    are that turn's)."""
    output: Any = None
    """A typed run's answer (``output_type``): an instance of that type, its JSON value where
    no facade turned it into one (a driver of its own); None for a run without one, or that
    did not complete (see :mod:`miniagent.core.output`)."""

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def answered_at_limit(self) -> bool:
        """Whether ``final_answer`` is the best answer the model gave when the run reached
        ``max_steps`` (one last request, with no tools; the reason says so too), not one it
        completed: the status stays ``max_steps``."""
        return self.status == "max_steps" and self.final_answer is not None


_T = TypeVar("_T")
_Fields = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]
_INIT_FIELDS: dict[type, _Fields | None] = {}


def replaced(obj: _T, /, **changes: Any) -> _T:
    """A copy of the dataclass instance ``obj`` with ``changes``: what
    :func:`dataclasses.replace` returns, at a fraction of its cost for the plain dataclasses
    of the hot path (each class's fields are read once, then copied by one C getter). A class
    with fields outside ``__init__`` (or init-only ones) goes through ``dataclasses.replace``.

    Example:
        >>> replaced(ToolCall(id="a", name="add"), id="b")
        ToolCall(id='b', name='add', arguments={}, raw_arguments='', arguments_error=None)
    """
    cls = type(obj)
    plain = _INIT_FIELDS.get(cls, _UNSEEN)
    if plain is _UNSEEN:
        plain = _INIT_FIELDS[cls] = _plain_fields(cls)
    if plain is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    names, values = plain
    kwargs = dict(zip(names, values(obj)))
    kwargs.update(changes)
    return cls(**kwargs)


_UNSEEN: Any = object()


def _plain_fields(cls: type) -> _Fields | None:
    """The names of ``cls``'s fields, all given to ``__init__``, and a getter of their values
    in that order; None when some are not, or when it has init-only or class variables
    (``dataclasses.replace`` handles those)."""
    fields = dataclasses.fields(cls)
    if len(fields) != len(vars(cls)["__dataclass_fields__"]) or not all(f.init for f in fields):
        return None
    names = tuple(f.name for f in fields)
    if len(names) > 1:
        return names, attrgetter(*names)
    return names, lambda obj: tuple(getattr(obj, name) for name in names)


# -- the context of a running tool call ------------------------------------------------

class SlotKey:
    """Names the concurrency slots of one tool definition; a tool's copies share it (see
    :mod:`miniagent.core.throttles`, which keeps the slots)."""

    __slots__ = ("__weakref__",)


@dataclasses.dataclass(frozen=True, slots=True)
class ToolContext:
    """The call being run: its session, step, call id, attempt and idempotency key (the same
    on every attempt; ``attempt`` counts them)."""

    session_id: str
    call_id: str
    tool: str
    step: int
    idempotency_key: str
    attempt: int = 1
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    decision: Decision | None = None
    """A person's decision on what this call's sub-run waited for (agents as tools)."""
    tokens_left: int | None = None
    """What is left of the run's token budget for this call (``None``: no budget); an agent
    used as a tool runs within it, so nesting cannot multiply a budget."""
    deadline: float | None = None
    """When the run's deadline passes (seconds since the epoch; ``None``: none)."""
    steps_left: int | None = None
    """This call's share of the model calls the run has left (``None``: not counted)."""
    default_retry: RetryPolicy | None = None
    """The run's retry policy for a tool that sets none (``Agent(tool_retry=...)``)."""

    @classmethod
    def for_call(cls, session_id: str, call_id: str, tool: str, step: int,
                 metadata: dict[str, Any] | None = None, *,
                 decision: Decision | None = None, tokens_left: int | None = None,
                 deadline: float | None = None, steps_left: int | None = None,
                 default_retry: RetryPolicy | None = None) -> ToolContext:
        return cls(session_id=session_id, call_id=call_id, tool=tool, step=step,
                   idempotency_key=f"{session_id}:{call_id}", metadata=dict(metadata or {}),
                   decision=decision, tokens_left=tokens_left, deadline=deadline,
                   steps_left=steps_left, default_retry=default_retry)


_CURRENT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "miniagent_tool_context", default=None)


def tool_context() -> ToolContext:
    """The context of the tool call running now; a clear error outside one."""
    context = _CURRENT.get()
    if context is None:
        raise LookupError("tool_context() is only available inside a tool call run by an agent")
    return context


def current_context() -> ToolContext | None:
    """The context of the tool call running now, or None."""
    return _CURRENT.get()


class using_context:  # a context manager, used like a function
    """Install ``context`` for the code run inside (tasks and worker threads started there
    inherit it). A class rather than a generator: it is entered around every tool call."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: ToolContext) -> None:
        self._context = context

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self._context)

    def __exit__(self, *exc_info: object) -> None:
        _CURRENT.reset(self._token)


# -- who hears that a call waits -------------------------------------------------------------------

WaitReporter = Callable[[str, str], None]
"""Called with ``(what, reason)`` when a call starts to wait: ``what`` is ``tool NAME`` or
``model NAME at URL``, ``reason`` says which limit holds it."""

_REPORTER: contextvars.ContextVar[WaitReporter | None] = contextvars.ContextVar(
    "miniagent_wait_reporter", default=None)


class reporting_waits:  # a context manager, used like a function
    """Have waits inside (tasks and threads started there too) reported to ``reporter``.

    A class rather than a generator: the step logic enters one around every model and tool
    call, and with no reporter to install where none is installed it does nothing at all.
    """

    __slots__ = ("_reporter", "_token")

    def __init__(self, reporter: WaitReporter | None) -> None:
        self._reporter = reporter
        self._token: contextvars.Token[WaitReporter | None] | None = None

    def __enter__(self) -> None:
        if self._reporter is not None or _REPORTER.get() is not None:
            self._token = _REPORTER.set(self._reporter)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is None:
            return
        # a coroutine closed from another context (a Temporal workflow evicted from the cache,
        # closed when collected) has nothing to restore there
        with contextlib.suppress(ValueError):
            _REPORTER.reset(self._token)


def current_reporter() -> WaitReporter | None:
    """The reporter installed here, if any."""
    return _REPORTER.get()


def report_wait(what: str, reason: str) -> None:
    """Tell the installed reporter (if any) that ``what`` waits, and why; never raises."""
    reporter = _REPORTER.get()
    if reporter is None:
        return
    try:
        reporter(what, reason)
    except Exception:  # a display must not stop a call
        log.exception("wait reporter failed on %s", what)

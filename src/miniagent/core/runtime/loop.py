"""The step logic: the one place where a step is decided.

A session's ``phase`` says what comes next: ``model`` (render the history through the protocol,
generate, parse, apply the guards, plan the calls) or ``tools`` (run what may run, then append
the observations or wait for a person). Each step ends with a typed next step (:data:`NextStep`:
call tools, finish, retry after a format error, stop, wait for a person, ask the model again),
which one table (:data:`_ACTIONS`) turns into what happens to the session. Every effect goes
through the driver's :class:`~miniagent.core.runtime.effects.Effects`; this module does no I/O of
its own and reads no clock, so the same effect results give the same session, byte for byte: the
in-process driver, a Temporal workflow and a test's fake all run this same code, inside the one
run shell below (:func:`run_session`).

A step's calls are recorded ``started`` (and checkpointed) before they run and ``completed``
(and checkpointed) when each returns, so a resumed run never repeats a completed call.

**The run shell.** :func:`run_session` owns the whole run of a session: it starts the step
logic, holds the run's deadline, turns whatever stops the run into a status, settles the run's
time, makes the last checkpoint and returns the result (announced with ``run_finished``). A
driver calls it with its :class:`~miniagent.core.runtime.effects.Effects` and keeps the session
where it lives; it decides nothing of this. Neither part does I/O, reads a clock or draws a
random number: a Temporal workflow runs them too.

What stops a run, and the status it ends with:

- the step logic's own decisions: ``completed``, ``max_steps``, ``budget_exceeded``,
  ``loop_detected``, or ``awaiting_approval`` when calls wait for a person;
- the deadline (``limits.timeout``): ``timeout``; the run's work gets :data:`CANCEL_GRACE`
  seconds to wind down, then is left behind (a tool that ignores cancellation cannot hold it);
- a :class:`~miniagent.core.errors.RunFailure` from an effect (the model after its retries, a
  payload over a limit): ``error``, with its message; a :class:`~miniagent.core.errors.SessionError`
  (the store refused a checkpoint: another process took the session over) likewise, and the
  last checkpoint is not tried again;
- a bug of ours: ``error``, ``internal error: ...`` (logged with its traceback).

Effects that interrupt a run (:class:`~miniagent.core.errors.RunInterrupted`): a
:class:`~miniagent.core.errors.ToolInterrupted` call is recovered inside the step logic like a
call a crash interrupted; a :class:`~miniagent.core.errors.Rollover` settles the run's time and
passes through, for the driver to go on in a fresh run (no last checkpoint, no result). A
cancellation of the run's task passes through as well; the driver says what it means with
``cancel_ends``: in process an interrupted process (the session stays as its last checkpoint
left it, and can be resumed), on Temporal a person who cancelled the session (it ends
``cancelled``, with its last checkpoint and ``run_finished``, before the cancellation goes on).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from miniagent._internal.wording import token_count
from miniagent.core.errors import (
    ModelError,
    ModelSwitched,
    Rollover,
    RunFailure,
    SessionError,
    ToolInterrupted,
)
from miniagent.core.runtime.effects import Effects
from miniagent.core.runtime.grounding import (
    defaults_of,
    refusal_reason,
    to_refuse,
    ungrounded_note,
)
from miniagent.core.runtime.guards import (
    REPEATED,
    LoopDetector,
    admit_observation,
    admit_parsed,
    admit_response,
    apply_choice,
    choice_for_step,
    copied_example,
    cut_off,
    earlier_result,
    enforce_choice,
    judged,
    no_progress,
    repeated_last,
    restated,
    rounds_done,
    too_many_calls,
    with_estimate,
)
from miniagent.core.session import (
    FINAL,
    AgentSession,
    answered,
    apply_decision,
    call_to_run,
    denial,
    parameters_of,
    record_outcome,
    recover_interrupted,
    relayed_decision,
    truncate_observation,
)
from miniagent.core.types import (
    CallRecord,
    Message,
    ModelRequest,
    ModelResponse,
    ParsedOutput,
    PendingApproval,
    RunResult,
    SessionStatus,
    Step,
    ToolCall,
    ToolContext,
    ToolLike,
    WaitReporter,
    replaced,
    reporting_waits,
)

if TYPE_CHECKING:
    from miniagent.core.runtime import events as ev
    from miniagent.core.runtime.run import Rules

__all__ = ["AT_LIMIT", "CANCEL_GRACE", "AnswerAtLimit", "CallTools", "Finish", "NextStep",
           "RepairOutput", "RetryFormat", "StepLogic", "Stop", "ToModel", "WaitForPerson",
           "first_request", "run_session", "warmup_request"]

log = logging.getLogger("miniagent")


# -- how a step ends ------------------------------------------------------------------------
# (each is dispatched on its type and never compared: no generated __eq__, a cheaper first run)

@dataclass(frozen=True, slots=True, eq=False)
class CallTools:
    """The reply's calls are recorded: run them (the tools phase)."""


@dataclass(frozen=True, slots=True, eq=False)
class Finish:
    """The model gave its final answer."""

    answer: str
    text: str


@dataclass(frozen=True, slots=True, eq=False)
class RetryFormat:
    """The reply was neither an action nor an answer: restate the format to the model."""

    parsed: ParsedOutput


@dataclass(frozen=True, slots=True, eq=False)
class Stop:
    """A guard ends the run (max steps, token budget, a loop)."""

    status: SessionStatus
    reason: str
    guard: ev.GuardName
    call_id: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class AnswerAtLimit:
    """At ``max_steps``, the last request's reply: the model's best answer (None: it gave
    none). The run ends as ``stop`` says, with that answer."""

    stop: Stop
    answer: str | None
    text: str
    error: str


@dataclass(frozen=True, slots=True, eq=False)
class RepairOutput:
    """The final answer does not fit the turn's output schema: the model is told what is
    wrong (``call``: the ``final_result`` call that gave it), or, past the repairs a turn
    gets, the run ends ``error`` (see :mod:`miniagent.core.runtime.output`)."""

    problem: str
    text: str
    call: ToolCall | None = None


@dataclass(frozen=True, slots=True, eq=False)
class WaitForPerson:
    """Calls wait for a person's decision."""

    pending: list[PendingApproval]


@dataclass(frozen=True, slots=True, eq=False)
class ToModel:
    """Every call has its observation: the model's turn."""


NextStep = (CallTools | Finish | RetryFormat | RepairOutput | Stop | AnswerAtLimit | WaitForPerson
            | ToModel)

AT_LIMIT = ("You have no steps left: give your best Final Answer now from the observations "
            "above.")
"""What the last request at ``max_steps`` asks (with no tools offered)."""
ANSWERED_AT_LIMIT = "the answer was given at the limit (one last request, with no tools)"
"""Added to the reason of a run that ended ``max_steps`` with that answer."""


class StepLogic:
    """Steps one run of a session; a new instance per run (it holds the run's spans)."""

    def __init__(self, rules: Rules, effects: Effects) -> None:
        self.rules, self.spec, self.effects = rules, rules.spec, effects
        self.run_span = effects.new_id()
        self._step_spans: dict[int, str] = {}
        self._started = effects.now()
        self._detector: LoopDetector | None = None

    async def run(self, session: AgentSession) -> None:
        """Step ``session`` until its run stops (its status is no longer ``running``)."""
        self._detector = LoopDetector.replaying(session.turn_steps, self.spec.limits.repeat_limit)
        self._recover(session)
        self._emit("RunStarted", session, span=self.run_span, parent=None,
                   question=session.turn.question)
        if self.spec.recall is not None:  # no coroutine made for an agent without a memory
            await self._recall(session)
        while not session.done:
            try:
                if session.phase == "tools":
                    next_step = await self.tools_step(session)
                else:
                    next_step = await self.model_step(session)
            except ToolInterrupted:  # its worker died: as after a crash, by the call's policy
                self._recover(session)
                continue
            await _ACTIONS[type(next_step)](self, session, next_step)

    def stop(self, session: AgentSession, status: SessionStatus, reason: str) -> None:
        """End the run from outside a step (deadline, store failure, a bug of ours)."""
        session.finish(status, reason, at=self.effects.now())

    def cancel(self, session: AgentSession, reason: str) -> None:
        """End the session for good (a person cancelled it), even while it waits."""
        if session.status not in FINAL:
            session.transition("cancelled", reason, at=self.effects.now())

    def settle(self, session: AgentSession) -> None:
        """Account the run's time; the last checkpoint comes after this."""
        session.add_time(self.effects.now() - self._started)
        session.updated_at = self.effects.now()

    def finished(self, session: AgentSession) -> RunResult:
        """The run's result, announced to subscribers (a typed one with its JSON value)."""
        result = session.result()
        schema = _schema(self.rules, session)
        if schema is not None and result.status == "completed" and result.final_answer:
            from miniagent.core.runtime import output  # a typed turn

            result.output = output.answer_of(result.final_answer, schema)[0]
        self._emit("RunFinished", session, span=self.run_span, parent=None, result=result)
        return result

    async def _recall(self, session: AgentSession) -> None:
        """What the memory holds on the turn's question, before its first step."""
        from miniagent.core.runtime import recall  # an agent with a memory: loaded on its first run

        span = self.effects.new_id()
        done = await recall.before_turn(session, self.rules, self.effects, f"recall_{span}")
        if done is not None:
            self._emit("MemoryRecalled", session, span=span, parent=self.run_span,
                       query=done.query, text=done.text, error=done.error)
            await self._checkpoint(session)

    def _recover(self, session: AgentSession) -> None:
        recover_interrupted(session, self.rules.tools.is_idempotent, self.spec.on_interrupted,
                            at=self.effects.now())
        for record in session.open_calls():  # put to a person: an edit is checked on its schema
            if record.state == "awaiting_approval" and record.parameters is None:
                record.parameters = parameters_of(self.rules.tools.listed(), record.call.name)

    # -- the model phase ------------------------------------------------------------------

    async def model_step(self, session: AgentSession) -> NextStep:
        """One model call and what follows from it (at ``max_steps``, the last one: its answer
        at the limit)."""
        limit = self._limit_reached(session)
        if limit is not None and not self._asks_at_limit(session, limit):
            return limit
        index = len(session.steps) + 1
        span = self._step_spans[index] = self.effects.new_id()
        if self.effects.observed:  # the step's events are built only for a listener
            self._emit("StepStarted", session, span=span, parent=self.run_span, step=index)
        if self.spec.compression is not None:  # no coroutine made on every step without one
            await self._compress(session, index, span)
        if limit is not None:
            return await self._last_answer(session, index, limit)
        tools, offered = _offer(self.rules, session)
        turn = _next_turn(self.rules, session, tools)
        response, parsed, elapsed = await self._generate(session, index, turn)
        step = self._record_step(session, index, response, parsed, elapsed, offered)
        if turn.output is not None:
            typed = _typed_answer(parsed, turn.output, cut=_cut_call(parsed, response,
                                                                     self.spec.max_tokens))
            if typed is not None:
                return typed
        if parsed.kind == "final":
            return Finish(answer=parsed.final_answer or "", text=parsed.text)
        if parsed.kind == "action":
            return self._plan(session, step, parsed, response)
        return RetryFormat(parsed=parsed)

    def _record_step(self, session: AgentSession, index: int, response: ModelResponse,
                     parsed: ParsedOutput, elapsed: float, offered: list[str] | None) -> Step:
        step = Step(index=index, thought=parsed.thought, raw_output=response.content,
                    usage=response.usage, model_time=elapsed, offered_tools=offered,
                    model=response.model,
                    first_message=len(session.messages))
        session.steps.append(step)
        session.add_usage(response.usage)
        return step

    def _asks_at_limit(self, session: AgentSession, limit: Stop) -> bool:
        """Whether the run asks for an answer at ``limit``: at ``max_steps`` (not 0), with
        tokens left in the budget and a history within the compression bound."""
        limits = self.spec.limits
        if limit.guard != "max_steps" or limits.max_steps < 1:
            return False
        if (limits.token_budget is not None
                and session.turn.usage.counted_tokens >= limits.token_budget):
            return False
        if self.spec.compression is None:
            return True
        from miniagent.core.runtime import compress  # an agent that compresses

        return not compress.overflow(session, self.spec.compression)

    async def _last_answer(self, session: AgentSession, index: int, limit: Stop) -> NextStep:
        """At ``max_steps``, one last request with no tools (:data:`AT_LIMIT`): the model's best
        answer from what it has. A failed request, or a reply that is no answer, leaves the run
        as the limit alone would (the reply is not kept in the history)."""
        try:
            response, parsed, elapsed = await self._generate(session, index,
                                                             _last_turn(self.rules, session))
        except ModelError:
            return limit
        self._record_step(session, index, response, parsed, elapsed, [])
        answer, text = parsed.final_answer if parsed.kind == "final" else None, parsed.text
        schema = _schema(self.rules, session)
        if schema is not None:  # a typed turn: an answer that fits, or a final_result call
            typed = _typed_answer(parsed, schema, cut=_cut_call(parsed, response,
                                                                self.spec.max_tokens))
            answer, text = (typed.answer, typed.text) if isinstance(typed, Finish) else (None,
                                                                                         text)
        return AnswerAtLimit(stop=limit, answer=answer, text=text,
                             error=parsed.error or f"a reply of kind {parsed.kind}")

    async def _compress(self, session: AgentSession, index: int, span: str) -> None:
        """Compact the history if it crossed ``compress_at`` (an agent that compresses)."""
        config = self.spec.compression
        assert config is not None
        from miniagent.core.runtime import (
            compress,  # an agent that compresses: loaded on its first run
        )

        done = await compress.compact(session, config, self.effects.generate, step=index,
                                      now=self.effects.now)
        if done is not None:
            self._emit("ContextCompacted", session, span=self.effects.new_id(),
                       parent=span, step=index, compaction=done)
            await self._checkpoint(session)

    def _limit_reached(self, session: AgentSession) -> Stop | None:
        limits, used = self.spec.limits, session.turn.usage.counted_tokens
        if len(session.turn_steps) >= limits.max_steps:
            return Stop(status="max_steps", guard="max_steps",
                        reason=f"no final answer after max_steps={limits.max_steps}")
        if limits.token_budget is not None and used >= limits.token_budget:
            return Stop(status="budget_exceeded", guard="token_budget",
                        reason=f"used {token_count(session.turn.usage)} of a budget of "
                               f"{limits.token_budget:,}")
        if self.spec.compression is None:
            return None
        from miniagent.core.runtime import compress  # an agent that compresses

        too_large = compress.overflow(session, self.spec.compression)
        if too_large:
            return Stop(status="budget_exceeded", guard="compress_at", reason=too_large)
        return None

    async def _generate(self, session: AgentSession, index: int, turn: _Turn
                        ) -> tuple[ModelResponse, ParsedOutput, float]:
        """Render, call the model (once more if the protocol can recover, or if it asks for
        the turn again: a ``retry`` reply), parse, and judge the reply
        (:func:`~miniagent.core.runtime.guards.judged`)."""
        protocol, step_span = self.rules.protocol, self._step_spans[index]
        request = self._render(turn)
        span, started = self.effects.new_id(), self.effects.now()
        if self.effects.observed:
            listed = self.rules.tools.listed()
            # which tools a selection offered; moot for a step that may call none
            selected = (self.spec.tool_selection is not None or self.spec.strict_selection
                        ) and turn.choice != "none"
            self._emit("ModelStarted", session, span=span, parent=step_span, step=index,
                       request=request, available=len(listed),
                       offered=[t.name for t in turn.tools] if selected else None)
        try:
            with reporting_waits(self._waits(session, span, step_span, index)):
                response, sent = await self._ask(request, turn)
            parsed = protocol.parse(response, sent)
            if parsed.kind == "retry":  # the endpoint ignored part of the request: anew
                spent = response.usage
                with reporting_waits(self._waits(session, span, step_span, index)):
                    response, sent = await self._ask(self._render(turn), turn)
                response = dataclasses.replace(response, usage=spent + response.usage)
                parsed = _no_retry(protocol.parse(response, sent))
        except ModelError as exc:
            self._emit("ModelFailed", session, span=span, parent=step_span, step=index,
                       error=str(exc), elapsed=self.effects.now() - started,
                       error_type=type(exc).__name__)
            raise
        elapsed = self.effects.now() - started
        parsed = judged(parsed, response, offered=bool(turn.tools), choice=turn.choice,
                        steps=session.turn_steps, max_tokens=self.spec.max_tokens)
        parsed = self._with_ids(_enforced(parsed, turn), session)
        if self.effects.observed:
            self._emit("ModelResponded", session, span=span, parent=step_span, step=index,
                       response=response, parsed=parsed, elapsed=elapsed,
                       retried=None if sent is request else sent)
        return response, parsed, elapsed

    async def _reply(self, request: ModelRequest) -> ModelResponse:
        """The model's reply, made safe to keep; a usage its server did not report, estimated."""
        return with_estimate(admit_response(await self.effects.generate(request)), request)

    def _render(self, turn: _Turn) -> ModelRequest:
        return _rendered(self.rules, turn)

    async def _ask(self, request: ModelRequest, turn: _Turn
                   ) -> tuple[ModelResponse, ModelRequest]:
        """The reply to ``request``, or to what the protocol sends instead after an error;
        and the request it answers. After a fallback model switched to a model that takes
        requests of another shape, the turn is rendered for it (by the protocol's ``recover``,
        else anew) and asked again: at most once per model of the fallback."""
        try:
            return await self._reply(request), request
        except ModelError as exc:
            retry = self.rules.protocol.recover(exc, request, turn.history, turn.tools,
                                                self.spec.instructions)
            if isinstance(exc, ModelSwitched):
                again = self._render(turn) if retry is None else _settled(self.rules, retry, turn)
                return await self._ask(again, turn)
            if retry is None:
                raise
            request = _settled(self.rules, retry, turn)
            return await self._reply(request), request

    def _with_ids(self, parsed: ParsedOutput, session: AgentSession) -> ParsedOutput:
        """The parsed reply made safe to keep, its calls given ids from the driver where the
        model sent none or reused one (copies: replies may be shared). Ids are unique within
        the session: approvals, idempotency keys and sub-sessions are keyed by them, and some
        servers number calls ``call_0``, ``call_1`` afresh on every turn."""
        parsed = admit_parsed(parsed)
        if not parsed.tool_calls:
            return parsed
        # ids the model sent are checked against the session's; a reply without ids (ReAct)
        # needs no look at the history, whose calls grow with the session
        used = ({record.call.id for step in session.steps for record in step.calls}
                if any(call.id for call in parsed.tool_calls) else set())
        calls = []
        for call in parsed.tool_calls:
            if not call.id or call.id in used:
                call = replaced(call, id=f"call_{self.effects.new_id()}")
            used.add(call.id)
            calls.append(call)
        parsed.tool_calls = calls
        return parsed

    def _plan(self, session: AgentSession, step: Step, parsed: ParsedOutput,
              response: ModelResponse) -> NextStep:
        """Record the step's calls: ready, waiting for approval, or answered without running
        (cut off, or repeated: an intervention). Calls beyond the per-step limit are dropped
        (the model is told with the observations)."""
        limit, now = self.spec.limits.max_calls_per_step, self.effects.now()
        if len(parsed.tool_calls) > limit:
            step.dropped_calls = len(parsed.tool_calls) - limit
            parsed.tool_calls = parsed.tool_calls[:limit]
            self._report(session, step.index, "call_limit", f"{step.dropped_calls} of "
                         f"{limit + step.dropped_calls} calls dropped (limit {limit} per step)")
        session.messages.append(Message(role="assistant", content=parsed.text,
                                        tool_calls=parsed.tool_calls, reasoning=parsed.reasoning))
        assert self._detector is not None
        for call in parsed.tool_calls:
            verdict = self._detector.check(call)  # a call cut off the same way again counts too
            if verdict == "stop":
                return Stop(status="loop_detected", guard="loop_stop", call_id=call.id,
                            reason=f"'{call.name}' was repeated with the same arguments after "
                                   "an intervention")
            refused = cut_off(call, response, self.spec.max_tokens)
            early = self._early_answer(session, call, parsed) if refused is None else None
            copied = copied_example(call) if refused is None else None
            figures = (self._ungrounded(session, call) if refused is None and copied is None
                       else ())
            if refused is not None:
                record = answered(call, refused, "cut off: not run", at=now)
                self._report(session, step.index, "cut_off", refused, call.id)
            elif early is not None:
                record = answered(call, early, "an answer beside other calls: not taken", at=now)
                self._report(session, step.index, "output_invalid", early, call.id)
            elif copied is not None:
                record = answered(call, copied, "the example's placeholders: not run", at=now)
                self._report(session, step.index, "placeholder", copied, call.id)
            elif figures:
                note = ungrounded_note(call, figures)
                record = answered(call, note, refusal_reason(figures), at=now)
                self._report(session, step.index, "ungrounded", note, call.id)
            elif verdict == "intervene":
                text = LoopDetector.intervention(call, self.spec.limits.repeat_limit,
                                                 earlier_result(session.turn_steps, call))
                record = answered(call, text, REPEATED, at=now)
                self._report(session, step.index, "repeat", text, call.id)
            else:
                record = CallRecord(call=call)
                if self.rules.tools.needs_approval(call):
                    record.note = f"'{call.name}' needs approval"
                    record.parameters = parameters_of(self.rules.tools.listed(), call.name)
                    record.move("awaiting_approval", record.note, now)
            step.calls.append(record)
        return CallTools()

    def _early_answer(self, session: AgentSession, call: ToolCall, parsed: ParsedOutput
                      ) -> str | None:
        """Why a typed turn's ``final_result`` call is not taken (it came beside other calls),
        or None (:func:`~miniagent.core.runtime.output.early_answer`)."""
        if _schema(self.rules, session) is None:
            return None  # an untyped run may have a tool of that name
        from miniagent.core.runtime import output  # a typed turn

        return output.early_answer(call, parsed.tool_calls)

    def _ungrounded(self, session: AgentSession, call: ToolCall) -> tuple[str, ...]:
        """Under ``ground_figures``: the figures ``call`` is refused for (see
        :mod:`miniagent.core.runtime.grounding`); empty otherwise."""
        if not self.spec.ground_figures:
            return ()
        told = [self.spec.instructions or ""]
        told.extend(defaults_of(tool.parameters)
                    for tool in self.rules.tools.listed() if tool.name == call.name)
        return to_refuse(call, session.messages, session.turn_steps, told)

    # -- the tools phase ------------------------------------------------------------------

    async def tools_step(self, session: AgentSession) -> NextStep:
        """Run what may run; then every call has its observation, or some wait for a person."""
        step, now = session.steps[-1], self.effects.now()
        for record in step.calls:
            if record.state == "denied":
                record.observation = denial(record)
                record.move("completed", "denied: the model is told why", now)
        runnable = [r for r in step.calls if r.state in ("ready", "approved")]
        for record in runnable:
            record.move("started", "about to run", now)
        if runnable:
            await self._checkpoint(session)  # started is on disk before any tool runs
        if len(runnable) == 1:  # the common step: one await level less on every resume
            await self._execute(session, step, runnable[0], None)
        elif runnable:
            await self._execute_all(session, step, runnable)
        waiting = [r for r in step.calls if r.state == "awaiting_approval"]
        if waiting:
            return WaitForPerson(pending=[PendingApproval.of(r) for r in waiting])
        return ToModel()

    async def _execute_all(self, session: AgentSession, step: Step,
                           runnable: list[CallRecord]) -> None:
        """Run the calls, at most ``tool_concurrency`` at a time; a failed checkpoint (or an
        interrupted call) surfaces only once every call has finished."""
        limit = self.spec.limits.tool_concurrency
        slots = asyncio.Semaphore(limit) if len(runnable) > limit else None
        outcomes = await asyncio.gather(
            *(self._execute(session, step, r, slots) for r in runnable), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _execute(self, session: AgentSession, step: Step, record: CallRecord,
                       slots: asyncio.Semaphore | None) -> None:
        span, parent = self.effects.new_id(), self._step_span(step.index)
        call = call_to_run(record)  # with a person's edit, if there is one
        if slots is not None:
            await slots.acquire()  # the start event fires when the call really starts
        try:
            if self.effects.observed:
                self._emit("ToolStarted", session, span=span, parent=parent, step=step.index,
                           call=call)
            context = ToolContext.for_call(session.id, record.call.id, record.call.name,
                                           step.index, session.metadata,
                                           decision=relayed_decision(record),
                                           tokens_left=self._share(session, step),
                                           deadline=self._deadline(),
                                           steps_left=self._steps_share(session, step),
                                           default_retry=self.spec.tool_retry)
            with reporting_waits(self._waits(session, span, parent, step.index,
                                             record.call.id)):
                observation = admit_observation(await self.effects.run_tool(call, context))
        finally:
            if slots is not None:
                slots.release()
        full, limit = len(observation.output), self.spec.limits.max_observation_chars
        observation.output = truncate_observation(observation.output, limit)
        if len(observation.output) != full:
            self._report(session, step.index, "truncated",
                         f"observation of {full:,} characters cut to {limit:,}", record.call.id)
        session.add_usage(record_outcome(record, observation, at=self.effects.now()))
        step.tool_time = max(step.tool_time, observation.elapsed)
        # completed is on disk as soon as it is known (with a sub-run's usage: all of it)
        await self._checkpoint(session, None if observation.sub_run else record)
        if self.effects.observed:
            self._emit("ToolFinished", session, span=span, parent=parent, step=step.index,
                       call=call, observation=observation)

    def _share(self, session: AgentSession, step: Step) -> int | None:
        """A call's share of what is left of the token budget: the rest, split between the
        step's calls (so sub-agents of one reply together stay within it)."""
        budget = self.spec.limits.token_budget
        if budget is None:
            return None
        return max(0, budget - session.turn.usage.counted_tokens) // _running(step)

    def _steps_share(self, session: AgentSession, step: Step) -> int:
        """A call's share of the model calls the run has left (nested runs draw on it, so a
        tree of agents cannot multiply ``max_steps``)."""
        return max(0, self.spec.limits.max_steps - len(session.turn_steps)) // _running(step)

    def _deadline(self) -> float | None:
        timeout = self.spec.limits.timeout
        return None if timeout is None else self._started + timeout

    # -- what each next step does ---------------------------------------------------------

    async def _finish(self, session: AgentSession, next_step: Finish) -> None:
        step = session.steps[-1]
        session.messages.append(Message(role="assistant", content=next_step.text))
        step.final_answer = next_step.answer
        session.finish("completed", "the model gave a final answer", next_step.answer,
                       at=self.effects.now())
        await self._end_step(session, step.index)

    async def _repair_output(self, session: AgentSession, next_step: RepairOutput) -> None:
        """An answer that does not fit the schema: the model is told what is wrong (as the
        result of its ``final_result`` call, or as a user message), or the run ends ``error``
        once the turn has had its repairs."""
        from miniagent.core.runtime import output  # a typed turn

        step, call = session.steps[-1], next_step.call
        done = output.repairs_done(session.turn_steps)  # this step's is not counted yet
        step.error = f"{output.OUTPUT_ERROR}: {next_step.problem}"
        self._report(session, step.index, "output_invalid", step.error)
        if done >= output.OUTPUT_RETRIES:
            session.finish("error", f"{step.error} (after {done} repairs)", at=self.effects.now())
            await self._end_step(session, step.index)
            return
        schema = _schema(self.rules, session)
        assert schema is not None
        note = output.repair_note(next_step.problem, schema, by_tool=call is not None)
        session.messages.append(Message(role="assistant", content=next_step.text,
                                        tool_calls=[call] if call else []))
        session.messages.append(Message(role="tool", content=note, tool_call_id=call.id,
                                        name=call.name) if call else
                                Message(role="user", content=note))
        await self._end_step(session, step.index)

    async def _call_tools(self, session: AgentSession, next_step: CallTools) -> None:
        session.move_to("tools")  # the tools phase checkpoints once the calls are started

    async def _retry_format(self, session: AgentSession, next_step: RetryFormat) -> None:
        """Output that is neither an action nor an answer: tell the model the exact format."""
        step, parsed = session.steps[-1], next_step.parsed
        step.error = parsed.error or "unparseable output"
        self._report(session, step.index, "format_error", step.error)
        if parsed.text:
            session.messages.append(Message(role="assistant", content=parsed.text))
        note = self.rules.protocol.format_error(
            step.error, _offered_only(self.rules.tools.listed(), step.offered_tools))
        session.messages.append(Message(role="user", content=note))
        await self._end_step(session, step.index)

    async def _stop(self, session: AgentSession, next_step: Stop) -> None:
        """A guard ends the run: in the step it was found in (a loop), or before any step (a
        limit; the run's last checkpoint follows)."""
        self.stop(session, next_step.status, next_step.reason)
        index = len(session.steps) if next_step.guard == "loop_stop" else 0
        self._report(session, index, next_step.guard, next_step.reason, next_step.call_id)
        if index:
            await self._end_step(session, index)

    async def _answer_at_limit(self, session: AgentSession, next_step: AnswerAtLimit) -> None:
        """The run ends ``max_steps`` either way: with the answer the last request gave (the
        request and the answer join the history), or as the limit alone ends it."""
        step, stop = session.steps[-1], next_step.stop
        if next_step.answer is None:
            step.error = f"no answer at the limit: {next_step.error}"
            self.stop(session, stop.status, stop.reason)
        else:
            session.messages.append(Message(role="user", content=AT_LIMIT))
            session.messages.append(Message(role="assistant", content=next_step.text))
            step.final_answer = next_step.answer
            stop = dataclasses.replace(stop, reason=f"max_steps={self.spec.limits.max_steps} "
                                                    f"reached: {ANSWERED_AT_LIMIT}")
            session.finish(stop.status, stop.reason, next_step.answer, at=self.effects.now())
        self._report(session, 0, stop.guard, stop.reason)
        await self._end_step(session, step.index)

    async def _wait(self, session: AgentSession, next_step: WaitForPerson) -> None:
        """The session waits for a person (saved so): the driver may bring decisions now (an
        inline approver, a workflow's update); without all of them the run stops here. A call
        that waited past the approval timeout is denied first (the model is told)."""
        step = session.steps[-1]
        if not self._time_out(step):
            return  # nothing waits any more: the tools phase goes on
        waiting = [r for r in step.calls if r.state == "awaiting_approval"]
        pending = [p for p in next_step.pending if p.call_id in {r.call.id for r in waiting}]
        names = ", ".join(f"{p.tool} ({p.call_id})" for p in pending)
        session.transition("awaiting_approval", f"waiting for approval of {names}",
                           at=self.effects.now())
        await self._checkpoint(session)  # a person may take long, or interrupt the process
        self._emit("ApprovalRequested", session, span=self._step_span(step.index),
                   parent=self.run_span, step=step.index, pending=pending)
        timeout = self.spec.limits.approval_timeout
        until = None if timeout is None else min(_waiting_since(r) for r in waiting) + timeout
        decisions = await self.effects.wait_for_decision(pending, until)
        for record in waiting:
            decision = decisions.get(record.call.id)
            if decision is not None:
                apply_decision(record, decision.approved, decision.reason,
                               at=self.effects.now(), arguments=decision.arguments)
        if not self._time_out(step):
            session.transition("running", "decided by a person", at=self.effects.now())

    def _time_out(self, step: Step) -> bool:
        """Deny the calls that waited past the approval timeout; whether any call still waits."""
        timeout, now = self.spec.limits.approval_timeout, self.effects.now()
        left = False
        for record in step.calls:
            if record.state != "awaiting_approval":
                continue
            if timeout is not None and now >= _waiting_since(record) + timeout - _TICK:
                apply_decision(record, False, f"no decision within {timeout:g} s", at=now)
            else:
                left = True
        return left

    async def _to_model(self, session: AgentSession, next_step: ToModel) -> None:
        step = session.steps[-1]
        notice = too_many_calls(len(step.calls) + step.dropped_calls,
                                len(step.calls)) if step.dropped_calls else ""
        if self.spec.restate_question:
            notice += restated(session.turn.question, step)
        for position, record in enumerate(step.calls, 1):
            assert record.observation is not None
            text = record.observation.output + (notice if position == len(step.calls) else "")
            session.messages.append(Message(role="tool", content=text,
                                            tool_call_id=record.call.id, name=record.call.name))
        session.move_to("model")
        await self._end_step(session, step.index)

    # -- helpers --------------------------------------------------------------------------

    async def _checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        session.updated_at = self.effects.now()
        await self.effects.checkpoint(session, call)

    def _step_span(self, index: int) -> str:
        """The span of step ``index`` (a resumed step gets a new one in this run)."""
        span = self._step_spans.get(index)
        if span is None:
            span = self._step_spans[index] = self.effects.new_id()
        return span

    async def _end_step(self, session: AgentSession, index: int) -> None:
        span = self._step_span(index)  # drawn either way: ids must not depend on listeners
        if self.effects.observed:
            self._emit("StepFinished", session, span=span, parent=self.run_span, step=index)
        await self._checkpoint(session)

    def _report(self, session: AgentSession, index: int, guard: ev.GuardName, detail: str,
                call_id: str | None = None) -> None:
        """Announce a guard's intervention in step ``index`` (0: the run as a whole)."""
        if not self.effects.observed:
            return
        span = self._step_span(index) if index else self.run_span
        self._emit("GuardIntervened", session, span=span,
                   parent=self.run_span if index else None, step=index, guard=guard,
                   detail=detail, call_id=call_id)

    def _waits(self, session: AgentSession, span: str, parent: str | None, step: int,
               call_id: str | None = None) -> WaitReporter | None:
        """What reports a wait for a slot inside this call as ``slot_waiting`` (the driver's
        executor or model calls it; :mod:`miniagent.core.throttles`)."""
        if not self.effects.observed:
            return None

        def report(what: str, reason: str) -> None:
            self._emit("SlotWaiting", session, span=span, parent=parent, step=step,
                       what=what, reason=reason, call_id=call_id)

        return report

    def _emit(self, kind: str, session: AgentSession, *, span: str,
              parent: str | None, step: int = 0, **fields: object) -> None:
        """Build the event class ``kind`` names (in :mod:`~miniagent.core.runtime.events`) and emit
        it, only when someone listens."""
        if not self.effects.observed:
            return  # span ids are still drawn: the ids a session gets must not depend on it
        # events are built only for a listener: their module loads with the first one
        from miniagent.core.runtime import events

        self.effects.emit(getattr(events, kind)(session_id=session.id, span_id=span,
                                                parent_id=parent, step=step,
                                                at=self.effects.now(), **fields))


@dataclass(slots=True, eq=False)  # not frozen: built on every step, and never changed
class _Turn:
    """What a step's request is rendered from."""

    history: Sequence[Message]
    tools: Sequence[ToolLike]
    choice: str | None
    quoted: Sequence[str] = ()
    """Tool results a Final Answer must quote (``quote_answers``); empty: a free answer."""
    output: dict[str, Any] | None = None
    """The JSON Schema the answer must fit (None: a free answer)."""


def first_request(rules: Rules, question: str = "") -> ModelRequest:
    """The request the first step of a new session asking ``question`` sends, rendered by the
    step logic's own code (the prefix a warm-up caches: :func:`warmup_request`)."""
    session = AgentSession.start(question, id="first-request", at=0.0)
    tools, _ = _offer(rules, session)
    return _rendered(rules, _next_turn(rules, session, tools))


def warmup_request(rules: Rules) -> ModelRequest:
    """What a model warms its prompt cache with before any question (the embedded model's
    warm-up): :func:`first_request` with no question, which a real first request matches up
    to the question. Under strict selection no question matches no tool (``Tools: none.``),
    while a real question nearly always matches one; the warm-up then offers the first tool,
    so a question matching it finds the whole prompt cached, and any other the part before
    the tools."""
    session = AgentSession.start("", id="first-request", at=0.0)
    tools, _ = _offer(rules, session)
    if not tools and rules.spec.strict_selection:
        tools = list(rules.tools.listed())[:1]
    return _rendered(rules, _next_turn(rules, session, tools))


def _offer(rules: Rules, session: AgentSession) -> tuple[list[ToolLike], list[str] | None]:
    """The tools the next step offers, and the names its step records (see
    :func:`~miniagent.core.runtime.selection.offer`). A ``required`` choice needs tools to choose
    from, so strict selection then fills its places as the plain one does."""
    spec = rules.spec
    if spec.tool_selection is None and not spec.strict_selection:
        return list(rules.tools.listed()), None  # no selection: every tool, as offer() does
    from miniagent.core.runtime.selection import offer  # an agent that selects its tools

    required = choice_for_step(spec.tool_choice, session.turn_steps) == "required"
    return offer(rules.tools.listed(), spec.tool_selection, session.messages, session.steps,
                 pinned=spec.tool_choice, strict=spec.strict_selection and not required)


def _offered_only(tools: Sequence[ToolLike], offered: Sequence[str] | None) -> list[ToolLike]:
    """The tools a step offered (:func:`~miniagent.core.runtime.selection.offered_only`): all of
    them when it selected none."""
    if offered is None:
        return list(tools)
    from miniagent.core.runtime.selection import offered_only  # the step had a selection

    return offered_only(tools, offered)


def _next_turn(rules: Rules, session: AgentSession, tools: Sequence[ToolLike]) -> _Turn:
    """What the next request is rendered from: the history, the offered tools, the step's
    tool choice, and the results a Final Answer must quote (a small-model aid)."""
    spec, steps = rules.spec, session.turn_steps
    choice = choice_for_step(spec.tool_choice, steps)
    if choice is None and spec.act_first and tools and not any(s.calls for s in steps):
        choice = "required"  # tools match the question: the first step acts
    if spec.limits.answer_after_repeat and (repeated_last(steps) or no_progress(steps)):
        choice = "none"  # the model repeats itself: it answers now
    after = spec.limits.answer_after_results
    if after is not None and rounds_done(steps) >= after:
        choice = "none"  # it has its results: it answers now
    quoted: Sequence[str] = []
    if spec.quote_answers:
        from miniagent.core.protocol import (
            quotes,  # a small-model aid: loaded by the agents using it
        )

        quoted = quotes.results(steps)
    return _Turn(_history(session), tools, choice, quoted, _schema(rules, session))


def _schema(rules: Rules, session: AgentSession) -> dict[str, Any] | None:
    """The JSON Schema the turn's answer must fit: the turn's own, else the agent's."""
    return session.turns[-1].output_schema or rules.spec.output_schema


def _cut_call(parsed: ParsedOutput, response: ModelResponse, max_tokens: int | None) -> bool:
    """Whether a call of the reply was cut off (:func:`cut_off`): its ``final_result`` is no
    answer, however whole its arguments look (``"total": 15`` of 1500)."""
    return any(cut_off(call, response, max_tokens) is not None for call in parsed.tool_calls)


def _enforced(parsed: ParsedOutput, turn: _Turn) -> ParsedOutput:
    """``parsed``, or an invalid reply where it does what the turn's tool choice forbids."""
    if turn.output is None:
        return enforce_choice(parsed, turn.choice)
    from miniagent.core.runtime import output  # a typed turn

    return output.enforce_answer_choice(parsed, turn.choice)


def _typed_answer(parsed: ParsedOutput, schema: dict[str, Any], *, cut: bool
                  ) -> NextStep | None:
    """A typed turn's reply that gives an answer (a Final Answer, or a ``final_result``
    call): Finish with it when it fits the schema, else RepairOutput. None: no answer (a
    ``final_result`` call ``cut`` off, or beside other calls, is refused with them)."""
    from miniagent.core.runtime import output  # a typed turn

    call = output.final_call(parsed.tool_calls) if parsed.kind == "action" else None
    if call is not None and (cut or output.early_answer(call, parsed.tool_calls)):
        return None
    if call is not None:
        text = json.dumps(call.arguments, ensure_ascii=False)
    elif parsed.kind == "final":
        text = parsed.final_answer or ""
    else:
        return None
    problem = output.answer_of(text, schema)[1]
    if problem is not None:
        return RepairOutput(problem=problem, text=parsed.text, call=call)
    return Finish(answer=text, text=parsed.text if call is None else text)


def _last_turn(rules: Rules, session: AgentSession) -> _Turn:
    """The last request at ``max_steps``: the history and :data:`AT_LIMIT`, no tools, and no
    call allowed (a quoted answer stays the rule where it is one)."""
    turn = _next_turn(rules, session, ())
    ask = Message(role="user", content=AT_LIMIT)
    return dataclasses.replace(turn, history=[*turn.history, ask], choice="none")


def _history(session: AgentSession) -> Sequence[Message]:
    """What the model is sent (:func:`~miniagent.core.runtime.compress.history`). Compaction and
    recall load their modules only for a session that has used them: without a compaction or a
    recalled block, the history is the messages."""
    if session.compactions:
        from miniagent.core.runtime import compress  # compacted: an agent that compresses (or did)

        return compress.history(session)
    for turn in session.turns:  # a loop, not any(): read on every step
        if turn.recalled:
            from miniagent.core.runtime import recall  # a block recalled: an agent's memory

            return recall.with_recalls(session)
    return session.messages


def _rendered(rules: Rules, turn: _Turn) -> ModelRequest:
    instructions = rules.spec.instructions
    if turn.output is not None:
        from miniagent.core.runtime import output  # a typed turn

        instructions = output.instructions(instructions, turn.output)
    request = rules.protocol.render(turn.history, turn.tools, instructions)
    return _settled(rules, request, turn)


def _settled(rules: Rules, request: ModelRequest, turn: _Turn) -> ModelRequest:
    """``request`` with the agent's sampling settings and the step's tool choice applied to
    the tools this step offers (a narrowed grammar never names a tool the selection left out)."""
    request.temperature, request.max_tokens = rules.spec.temperature, rules.spec.max_tokens
    request = apply_choice(request, turn.choice, turn.tools)
    if turn.output is not None:
        from miniagent.core.runtime import output  # a typed turn

        # a typed answer is the schema's JSON, never a quote
        return output.constrain(request, turn.output, response_format=rules.spec.response_format)
    if not turn.quoted:
        return request
    from miniagent.core.protocol import quotes  # loaded: quote_answers found results to quote

    return quotes.constrain(request, turn.quoted)


def _no_retry(parsed: ParsedOutput) -> ParsedOutput:
    """A second ``retry`` in one step is an invalid reply: the model is told, the run goes on."""
    if parsed.kind != "retry":
        return parsed
    return dataclasses.replace(parsed, kind="invalid", error=parsed.error or "asked again")


def _running(step: Step) -> int:
    """How many of the step's calls are running (at least 1: the one asking)."""
    running = 0
    for record in step.calls:  # a loop, not sum() over a generator: read for every call
        if record.state == "started":
            running += 1
    return running or 1


_TICK = 0.001
"""A timer may fire a hair early on a driver's clock (Temporal's): past is past by this much."""


def _waiting_since(record: CallRecord) -> float:
    """When the call began to wait for a person (its last move to ``awaiting_approval``)."""
    return next((m.at for m in reversed(record.moves) if m.target == "awaiting_approval"), 0.0)


_Action = Callable[[StepLogic, AgentSession, NextStep], Awaitable[None]]
_ACTIONS: dict[type, _Action] = {
    CallTools: StepLogic._call_tools,  # type: ignore[dict-item]
    Finish: StepLogic._finish,  # type: ignore[dict-item]
    RetryFormat: StepLogic._retry_format,  # type: ignore[dict-item]
    RepairOutput: StepLogic._repair_output,  # type: ignore[dict-item]
    Stop: StepLogic._stop,  # type: ignore[dict-item]
    AnswerAtLimit: StepLogic._answer_at_limit,  # type: ignore[dict-item]
    WaitForPerson: StepLogic._wait,  # type: ignore[dict-item]
    ToModel: StepLogic._to_model,  # type: ignore[dict-item]
}
"""What each kind of next step does to the session: the one dispatch of a step's end."""


# -- the run shell ---------------------------------------------------------------------------------

CANCEL_GRACE = 1.0
"""Seconds the run's work gets to wind down after its deadline before it is left behind."""


async def run_session(session: AgentSession, rules: Rules, effects: Effects, *,
                      cancel_ends: bool = False) -> RunResult:
    """Run the step logic on ``session`` until its run stops; always returns a result.

    Raises:
        Rollover: the driver goes on in a fresh run (see the module docstring).
        asyncio.CancelledError: the run's task was cancelled (with ``cancel_ends``, once the
            session has ended ``cancelled``).
    """
    logic = StepLogic(rules, effects)
    timeout = rules.spec.limits.timeout
    save = True
    try:
        await _within(logic.run(session), timeout)
    except asyncio.CancelledError:
        if cancel_ends:
            logic.cancel(session, "cancelled by a person")
            logic.settle(session)
            await effects.checkpoint(session)
            logic.finished(session)
        raise
    except asyncio.TimeoutError:
        logic.stop(session, "timeout", f"the run exceeded its deadline of {timeout} s")
    except Rollover:
        logic.settle(session)
        raise
    except SessionError as exc:  # another process took the session over, or a damaged store
        logic.stop(session, "error", str(exc))
        save = False
    except RunFailure as exc:
        logic.stop(session, "error", _failure(exc))
    except Exception as exc:  # a bug of ours must still end the run with a status
        log.exception("internal error in session %s", session.id)
        logic.stop(session, "error", f"internal error: {type(exc).__name__}: {exc}")
    logic.settle(session)
    if save:
        await effects.checkpoint(session)
    return logic.finished(session)


def _failure(exc: RunFailure) -> str:
    return f"model request failed: {exc}" if isinstance(exc, ModelError) else str(exc)


async def _within(work: Coroutine[Any, Any, None], timeout: float | None) -> None:
    """Await ``work``; past ``timeout`` cancel it and raise TimeoutError within
    :data:`CANCEL_GRACE` seconds, even if something in it ignores the cancellation."""
    if timeout is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE)
    raise asyncio.TimeoutError

"""The step logic: the one place where a step is decided.

A session's ``phase`` says what comes next: ``model`` (render the history through the protocol,
generate, parse, apply the guards, plan the calls) or ``tools`` (ask for decisions, run what may
run, append the observations). Every effect goes through :class:`Effects`, which a driver
supplies: the model call, a tool call, a checkpoint, the clock, new ids, waiting for a person,
and event delivery. This module does no I/O of its own and reads no clock, so the same effect
results give the same session, byte for byte: the in-process driver, a Temporal workflow and a
test's fake all run this same code.

A step's calls are recorded ``started`` (and checkpointed) before they run and ``completed``
(and checkpointed) when each returns, so a resumed run never repeats a completed call.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Protocol

from miniagent.errors import ModelError
from miniagent.protocol import tool_choice
from miniagent.protocol.base import ActionProtocol
from miniagent.runtime import compress, incoming, subruns
from miniagent.runtime import events as ev
from miniagent.runtime.approvals import (
    InterruptedPolicy,
    apply_decision,
    denial,
    recover_interrupted,
)
from miniagent.runtime.guards import (
    Limits,
    LoopDetector,
    cut_off,
    too_many_calls,
    truncate_observation,
)
from miniagent.runtime.selection import offer, offered_only
from miniagent.session import AgentSession
from miniagent.tool_context import ToolContext
from miniagent.types import (
    CallRecord,
    Decision,
    Message,
    ModelRequest,
    ModelResponse,
    Observation,
    ParsedOutput,
    PendingApproval,
    RunResult,
    SessionStatus,
    Step,
    ToolCall,
    ToolLike,
)


class Effects(Protocol):
    """Everything the step logic cannot do itself; a driver implements it."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """One model call; raises ModelError when the transport fails after its retries."""
        ...

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        """Run one validated call of a registered tool, with ``context`` installed for
        :func:`~miniagent.tool_context.tool_context`; never raises."""
        ...

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        """Save the session (or nothing, where history is the checkpoint). With ``call``, what
        changed since the last checkpoint is that one call's completion."""
        ...

    async def wait_for_decision(self, pending: list[PendingApproval]) -> dict[str, Decision]:
        """Decisions for some of these calls, by call id; the others keep waiting."""
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


class ToolCatalog(Protocol):
    """What the step logic needs to know of the tools a run may call."""

    @property
    def names(self) -> list[str]: ...

    def listed(self) -> Sequence[ToolLike]:
        """The tools offered to the model, in order."""
        ...

    def needs_approval(self, call: ToolCall) -> bool: ...

    def is_idempotent(self, name: str) -> bool: ...


@dataclasses.dataclass(kw_only=True)
class Rules:
    """The agent's configuration as the step logic reads it."""

    protocol: ActionProtocol
    tools: ToolCatalog
    limits: Limits
    instructions: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    on_interrupted: InterruptedPolicy = "ask"
    compression: compress.Compression | None = None
    tool_selection: int | None = None
    """Offer each request only this many tools, the most relevant (see runtime/selection.py)."""
    tool_choice: str | None = None
    """auto, required, none or a tool's name (see :mod:`miniagent.protocol.tool_choice`)."""


class StepLogic:
    """Steps one run of a session; a new instance per run (it holds the run's spans)."""

    def __init__(self, rules: Rules, effects: Effects) -> None:
        self.rules, self.fx = rules, effects
        self._run_span = effects.new_id()
        self._step_spans: dict[int, str] = {}
        self._started = effects.now()

    async def run(self, session: AgentSession) -> None:
        """Step ``session`` until its run stops (its status is no longer ``running``)."""
        rules = self.rules
        detector = LoopDetector.replaying(session.steps, rules.limits.repeat_limit)
        recover_interrupted(session, rules.tools.is_idempotent, rules.on_interrupted,
                            at=self.fx.now())
        self._emit(ev.RunStarted, session, span=self._run_span, parent=None,
                   question=session.question)
        try:
            while not session.done:
                if session.phase == "tools":
                    await self.tools_step(session)
                else:
                    await self.model_step(session, detector)
        except ModelError as exc:
            self.stop(session, "error", f"model request failed: {exc}")

    def stop(self, session: AgentSession, status: SessionStatus, reason: str) -> None:
        """End the run from outside a step (deadline, store failure, a bug of ours)."""
        session.finish(status, reason, at=self.fx.now())

    def settle(self, session: AgentSession) -> None:
        """Account the run's time; the driver's last checkpoint comes after this."""
        session.elapsed += self.fx.now() - self._started
        session.updated_at = self.fx.now()

    def finished(self, session: AgentSession) -> RunResult:
        """The run's result, announced to subscribers."""
        result = session.result()
        self._emit(ev.RunFinished, session, span=self._run_span, parent=None, result=result)
        return result

    # -- the model phase ------------------------------------------------------------------

    async def model_step(self, session: AgentSession, detector: LoopDetector) -> None:
        """One model call and what follows from it."""
        if self._limit_reached(session):
            return
        index = len(session.steps) + 1
        span = self._step_spans[index] = self.fx.new_id()
        self._emit(ev.StepStarted, session, span=span, parent=self._run_span, step=index)
        if self.rules.compression is not None:
            done = await compress.compact(session, self.rules.compression, self.fx.generate,
                                          step=index, now=self.fx.now)
            if done is not None:
                self._emit(ev.ContextCompacted, session, span=self.fx.new_id(), parent=span,
                           step=index, compaction=done)
                await self._checkpoint(session)
        tools, offered = offer(self.rules.tools.listed(), self.rules.tool_selection,
                               session.messages, session.steps, pinned=self.rules.tool_choice)
        response, parsed, elapsed = await self._generate(session, index, tools)
        step = Step(index=index, thought=parsed.thought, raw_output=response.content,
                    usage=response.usage, model_time=elapsed, offered_tools=offered)
        session.steps.append(step)
        session.usage = session.usage + response.usage
        if parsed.kind == "final":
            session.messages.append(Message(role="assistant", content=parsed.text))
            step.final_answer = parsed.final_answer
            session.finish("completed", "the model gave a final answer", parsed.final_answer,
                           at=self.fx.now())
        elif parsed.kind == "action":
            self._plan(session, step, parsed, detector, response)
            if not session.done:
                session.phase = "tools"
                return  # the tools phase checkpoints once the calls are marked started
        else:
            self._reject(session, step, parsed)
        self._end_step(session, index)
        await self._checkpoint(session)

    def _limit_reached(self, session: AgentSession) -> bool:
        limits, used = self.rules.limits, session.usage.total_tokens
        if len(session.steps) >= limits.max_steps:
            self.stop(session, "max_steps", f"no final answer after max_steps={limits.max_steps}")
            self._guard(session, 0, "max_steps", session.reason)
        elif limits.token_budget is not None and used >= limits.token_budget:
            self.stop(session, "budget_exceeded",
                      f"used {used:,} tokens of a budget of {limits.token_budget:,}")
            self._guard(session, 0, "token_budget", session.reason)
        return session.done

    async def _generate(self, session: AgentSession, index: int, tools: Sequence[ToolLike]
                        ) -> tuple[ModelResponse, ParsedOutput, float]:
        """Render, call the model (once more if the protocol can recover), parse."""
        rules, step_span = self.rules, self._step_spans[index]
        history = compress.history(session)
        choice = tool_choice.for_step(rules.tool_choice, session.steps)
        request = self._settings(rules.protocol.render(history, tools, rules.instructions),
                                 choice)
        span, started = self.fx.new_id(), self.fx.now()
        retried: ModelRequest | None = None
        self._emit(ev.ModelStarted, session, span=span, parent=step_span, step=index,
                   request=request)
        try:
            try:
                response = incoming.response(await self.fx.generate(request))
            except ModelError as exc:
                retry = rules.protocol.recover(exc, request, history, tools,
                                               rules.instructions)
                if retry is None:
                    raise
                request = retried = self._settings(retry, choice)
                response = incoming.response(await self.fx.generate(request))
        except ModelError as exc:
            self._emit(ev.ModelFailed, session, span=span, parent=step_span, step=index,
                       error=str(exc), elapsed=self.fx.now() - started,
                       error_type=type(exc).__name__)
            raise
        elapsed = self.fx.now() - started
        parsed = self._with_ids(tool_choice.enforce(rules.protocol.parse(response, request),
                                                    choice), session)
        self._emit(ev.ModelResponded, session, span=span, parent=step_span, step=index,
                   response=response, parsed=parsed, elapsed=elapsed, retried=retried)
        return response, parsed, elapsed

    def _settings(self, request: ModelRequest, choice: str | None) -> ModelRequest:
        request.temperature, request.max_tokens = self.rules.temperature, self.rules.max_tokens
        return tool_choice.constrain(request, choice, self.rules.tools.listed())

    def _with_ids(self, parsed: ParsedOutput, session: AgentSession) -> ParsedOutput:
        """The parsed reply made safe to keep, its calls given ids from the driver where the
        model sent none or reused one (copies: replies may be shared). Ids are unique within
        the session: approvals, idempotency keys and sub-sessions are keyed by them, and some
        servers number calls ``call_0``, ``call_1`` afresh on every turn."""
        parsed = incoming.parsed(parsed)
        if not parsed.tool_calls:
            return parsed
        used = {record.call.id for step in session.steps for record in step.calls}
        calls = []
        for call in parsed.tool_calls:
            if not call.id or call.id in used:
                call = dataclasses.replace(call, id=f"call_{self.fx.new_id()}")
            used.add(call.id)
            calls.append(call)
        parsed.tool_calls = calls
        return parsed

    def _plan(self, session: AgentSession, step: Step, parsed: ParsedOutput,
              detector: LoopDetector, response: ModelResponse) -> None:
        """Record the step's calls: ready, waiting for approval, or answered without running
        (cut off, or repeated: an intervention).

        Calls beyond the per-step limit are dropped (the model is told with the observations).
        """
        limit = self.rules.limits.max_calls_per_step
        if len(parsed.tool_calls) > limit:
            step.dropped_calls = len(parsed.tool_calls) - limit
            parsed.tool_calls = parsed.tool_calls[:limit]
            self._guard(session, step.index, "call_limit", f"{step.dropped_calls} of "
                        f"{limit + step.dropped_calls} calls dropped (limit {limit} per step)")
        session.messages.append(Message(role="assistant", content=parsed.text,
                                        tool_calls=parsed.tool_calls, reasoning=parsed.reasoning))
        for call in parsed.tool_calls:
            verdict = detector.check(call)  # a call cut off the same way again counts too
            if verdict == "stop":
                self.stop(session, "loop_detected", f"'{call.name}' was repeated with the same "
                          "arguments after an intervention")
                self._guard(session, step.index, "loop_stop", session.reason, call.id)
                return
            record = CallRecord(call=call)
            refused = cut_off(call, response, self.rules.max_tokens)
            if refused is not None:
                record = self._answered(call, refused, "cut off: not run")
                self._guard(session, step.index, "cut_off", refused, call.id)
            elif verdict == "intervene":
                text = LoopDetector.intervention(call, self.rules.limits.repeat_limit)
                record = self._answered(call, text, "repeated: answered with an intervention")
                self._guard(session, step.index, "repeat", text, call.id)
            elif self.rules.tools.needs_approval(call):
                record.note = f"'{call.name}' needs approval"
                record.move("awaiting_approval", record.note, self.fx.now())
            step.calls.append(record)

    def _answered(self, call: ToolCall, text: str, reason: str) -> CallRecord:
        """A call that is not run: completed at once, its observation the error ``text``."""
        record = CallRecord(call=call, observation=Observation(
            call_id=call.id, tool_name=call.name, output=text, is_error=True))
        record.move("completed", reason, self.fx.now())
        return record

    def _reject(self, session: AgentSession, step: Step, parsed: ParsedOutput) -> None:
        """Output that is neither an action nor an answer: tell the model the exact format."""
        step.error = parsed.error or "unparseable output"
        self._guard(session, step.index, "format_error", step.error)
        if parsed.text:
            session.messages.append(Message(role="assistant", content=parsed.text))
        note = self.rules.protocol.format_error(
            step.error, offered_only(self.rules.tools.listed(), step.offered_tools))
        session.messages.append(Message(role="user", content=note))

    # -- the tools phase ------------------------------------------------------------------

    async def tools_step(self, session: AgentSession) -> None:
        """Run what may run, then append the observations or wait for a person."""
        step = session.steps[-1]
        await self._ask(session, step)
        now = self.fx.now()
        for record in step.calls:
            if record.state == "denied":
                record.observation = denial(record)
                record.move("completed", "denied: the model is told why", now)
        runnable = [r for r in step.calls if r.state in ("ready", "approved")]
        for record in runnable:
            record.move("started", "about to run", now)
        if runnable:
            await self._checkpoint(session)  # started is on disk before any tool runs
        await self._execute_all(session, step, runnable)
        waiting = [r for r in step.calls if r.state == "awaiting_approval"]
        if waiting:
            names = ", ".join(f"{r.call.name} ({r.call.id})" for r in waiting)
            session.transition("awaiting_approval", f"waiting for approval of {names}",
                               at=self.fx.now())
        else:
            self._append_observations(session, step)
            session.phase = "model"
            self._end_step(session, step.index)
        await self._checkpoint(session)

    def _append_observations(self, session: AgentSession, step: Step) -> None:
        notice = too_many_calls(len(step.calls) + step.dropped_calls,
                                len(step.calls)) if step.dropped_calls else ""
        for position, record in enumerate(step.calls, 1):
            assert record.observation is not None
            text = record.observation.output + (notice if position == len(step.calls) else "")
            session.messages.append(Message(role="tool", content=text,
                                            tool_call_id=record.call.id, name=record.call.name))

    async def _ask(self, session: AgentSession, step: Step) -> None:
        waiting = [r for r in step.calls if r.state == "awaiting_approval"]
        if not waiting:
            return
        await self._checkpoint(session)  # a person may take long, or interrupt the process
        pending = [PendingApproval.of(r) for r in waiting]
        self._emit(ev.ApprovalRequested, session, span=self._step_span(step.index),
                   parent=self._run_span, step=step.index, pending=pending)
        decisions = await self.fx.wait_for_decision(pending)
        for record in waiting:
            decision = decisions.get(record.call.id)
            if decision is not None:
                apply_decision(record, decision.approved, decision.reason, at=self.fx.now())

    async def _execute_all(self, session: AgentSession, step: Step,
                           runnable: list[CallRecord]) -> None:
        """Run the calls, at most ``tool_concurrency`` at a time; a failed checkpoint surfaces
        only once every call has finished."""
        if len(runnable) == 1:
            await self._execute(session, step, runnable[0], None)
            return
        limit = self.rules.limits.tool_concurrency
        slots = asyncio.Semaphore(limit) if len(runnable) > limit else None
        outcomes = await asyncio.gather(
            *(self._execute(session, step, r, slots) for r in runnable), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _execute(self, session: AgentSession, step: Step, record: CallRecord,
                       slots: asyncio.Semaphore | None) -> None:
        span, parent = self.fx.new_id(), self._step_span(step.index)
        if slots is not None:
            await slots.acquire()  # the start event fires when the call really starts
        try:
            self._emit(ev.ToolStarted, session, span=span, parent=parent, step=step.index,
                       call=record.call)
            context = ToolContext.for_call(session.id, record.call.id, record.call.name,
                                           step.index, session.metadata,
                                           decision=subruns.relayed_decision(record))
            observation = incoming.observation(await self.fx.run_tool(record.call, context))
        finally:
            if slots is not None:
                slots.release()
        full = len(observation.output)
        observation.output = truncate_observation(
            observation.output, self.rules.limits.max_observation_chars)
        if len(observation.output) != full:
            self._guard(session, step.index, "truncated", f"observation of {full:,} characters "
                        f"cut to {self.rules.limits.max_observation_chars:,}", record.call.id)
        session.usage = subruns.settle(session.usage, record, observation, at=self.fx.now())
        step.tool_time = max(step.tool_time, observation.elapsed)
        # completed is on disk as soon as it is known (with a sub-run's usage: all of it)
        await self._checkpoint(session, None if observation.sub_run else record)
        self._emit(ev.ToolFinished, session, span=span, parent=parent, step=step.index,
                   call=record.call, observation=observation)

    # -- helpers --------------------------------------------------------------------------

    async def _checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        session.updated_at = self.fx.now()
        await self.fx.checkpoint(session, call)

    def _step_span(self, index: int) -> str:
        """The span of step ``index`` (a resumed step gets a new one in this run)."""
        span = self._step_spans.get(index)
        if span is None:
            span = self._step_spans[index] = self.fx.new_id()
        return span

    def _end_step(self, session: AgentSession, index: int) -> None:
        self._emit(ev.StepFinished, session, span=self._step_span(index), parent=self._run_span,
                   step=index)

    def _guard(self, session: AgentSession, index: int, guard: ev.GuardName, detail: str,
               call_id: str | None = None) -> None:
        """Report a guard's intervention in step ``index`` (0: the run as a whole)."""
        if not self.fx.observed:
            return
        span = self._step_span(index) if index else self._run_span
        self._emit(ev.GuardIntervened, session, span=span,
                   parent=self._run_span if index else None, step=index, guard=guard,
                   detail=detail, call_id=call_id)

    def _emit(self, kind: type[ev.Event], session: AgentSession, *, span: str,
              parent: str | None, step: int = 0, **fields: object) -> None:
        if not self.fx.observed:
            return  # span ids are still drawn: the ids a session gets must not depend on it
        self.fx.emit(kind(session_id=session.id, span_id=span, parent_id=parent, step=step,
                          at=self.fx.now(), **fields))

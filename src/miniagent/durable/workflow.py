"""The session workflow: the step logic of :mod:`miniagent.runtime.loop`, run as Temporal
workflow code.

There is no second loop here. :class:`WorkflowEffects` implements the step logic's
:class:`~miniagent.runtime.loop.Effects`: a model call and a tool call are activities, time is
``workflow.now()``, ids come from ``workflow.uuid4()``, the checkpoint is the workflow's own
history, and waiting for a person is ``workflow.wait_condition`` on the decisions the update
and signal handlers record. Around the step logic the workflow only does what a driver does:
resume after a tool call a dead worker interrupted (the same ``recover_interrupted`` as in
process), continue as new when the history grows large, keep every payload under Temporal's
2 MB limit, and end every run with a status.

The module is safe for Temporal's sandbox: miniagent's modules and pydantic are passed
through, and nothing here runs at import time beyond definitions.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from miniagent.agent import protocol_for
    from miniagent.durable.activities import DESCRIBE, GENERATE, RUN_TOOL
    from miniagent.durable.catalog import ToolCatalog
    from miniagent.durable.contracts import (
        AgentSettings,
        DecisionInput,
        DecisionOutcome,
        Progress,
        SessionInput,
        SessionView,
        ToolInput,
        WorkerProfile,
    )
    from miniagent.durable.converter import encoded_size
    from miniagent.durable.faults import (
        PAYLOAD_LIMIT,
        PAYLOAD_TOO_LARGE,
        PayloadTooLarge,
        model_error,
        model_retry,
        tool_retry,
    )
    from miniagent.errors import UserError
    from miniagent.models.base import Capabilities
    from miniagent.protocol.tool_choice import check_choice
    from miniagent.runtime import events as ev
    from miniagent.runtime.guards import Limits
    from miniagent.runtime.loop import Rules, StepLogic
    from miniagent.session import AgentSession
    from miniagent.tool_context import ToolContext
    from miniagent.types import (
        CallRecord,
        Decision,
        ModelRequest,
        ModelResponse,
        Observation,
        PendingApproval,
        RunResult,
        ToolCall,
    )

WORKFLOW_NAME = "MiniAgentSession"
TOOL_MARGIN = 30.0
"""Seconds a tool activity gets beyond the tool's own timeout (the registry enforces that one
and answers with an error observation; this bounds a worker that hangs)."""


class ToolInterrupted(Exception):
    """A tool activity failed for good: its worker died, so its outcome is unknown."""


class Rollover(Exception):
    """The history is large: continue as new at this step boundary."""


def rules_for(settings: AgentSettings, profile: WorkerProfile) -> Rules:
    """The step logic's rules for ``settings`` (the same :func:`protocol_for` as in process)."""
    if settings.tool_mode is None:
        capabilities = Capabilities(tool_mode=profile.tool_mode,
                                    native_tools=profile.native_tools)
    else:
        capabilities = Capabilities(tool_mode=settings.tool_mode,
                                    native_tools=settings.native_tools)
    tools = profile.tools
    try:  # a name the workers lack would make every reply invalid until max_steps
        check_choice(settings.tool_choice, [t.name for t in tools])
    except ValueError as exc:
        raise UserError(str(exc)) from None
    limits = Limits(max_steps=settings.max_steps, token_budget=settings.token_budget,
                    timeout=settings.timeout,
                    max_observation_chars=settings.max_observation_chars,
                    repeat_limit=settings.repeat_limit,
                    max_calls_per_step=settings.max_calls_per_step,
                    tool_concurrency=settings.tool_concurrency)
    return Rules(protocol=protocol_for(capabilities, grammar=settings.grammar,
                                             max_tokens=settings.max_tokens),
                 tools=ToolCatalog(tools), limits=limits, instructions=settings.instructions,
                 temperature=settings.temperature, max_tokens=settings.max_tokens,
                 on_interrupted=settings.on_interrupted, tool_selection=settings.tool_selection,
                 compression=settings.compression, tool_choice=settings.tool_choice)


def check_size(value: Any, what: str) -> None:
    """Refuse ``value`` when its payload would be over Temporal's 2 MB limit."""
    if isinstance(value, ModelRequest) and _rough_size(value) < PAYLOAD_LIMIT // 4:
        return  # far below the limit: not worth encoding the transcript once more
    payload = workflow.payload_converter().to_payloads([value])[0]
    size = encoded_size(payload, PAYLOAD_LIMIT)
    if size > PAYLOAD_LIMIT:
        raise PayloadTooLarge(f"{what} is {size:,} bytes encoded, over Temporal's "
                              f"{PAYLOAD_LIMIT:,}-byte payload limit")


def _rough_size(request: ModelRequest) -> int:
    """About the JSON size of a request: its texts, which dominate it."""
    return sum(len(str(m.get("content") or "")) + 64 for m in request.messages) + len(
        request.grammar or "") + len(str(request.tools or ""))


class WorkflowEffects:
    """The step logic's effects, performed as workflow code (see the module docstring)."""

    def __init__(self, flow: SessionWorkflow, catalog: ToolCatalog) -> None:
        self.flow, self.catalog, self.settings = flow, catalog, flow.settings

    async def generate(self, request: ModelRequest) -> ModelResponse:
        check_size(request, "the model request (the whole transcript)")
        try:
            return await workflow.execute_activity(
                GENERATE, request, result_type=ModelResponse,
                start_to_close_timeout=timedelta(seconds=self.settings.model_timeout),
                retry_policy=model_retry(self.settings.model_attempts))
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == PAYLOAD_TOO_LARGE:
                raise PayloadTooLarge(cause.message) from None
            raise model_error(exc) from None

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        info = self.catalog.get(call.name)
        idempotent = info is not None and info.idempotent
        own = info.timeout if info is not None and info.timeout is not None else None
        work = ToolInput(call=call, session_id=context.session_id, step=context.step,
                         metadata=context.metadata, decision=context.decision,
                         max_observation_chars=self.settings.max_observation_chars)
        check_size(work, f"the arguments of call {call.id}")
        try:
            return await workflow.execute_activity(
                RUN_TOOL, work, result_type=Observation,
                activity_id=f"step{context.step}-{call.id}",
                start_to_close_timeout=timedelta(seconds=(own or 3600.0) + TOOL_MARGIN),
                heartbeat_timeout=timedelta(seconds=self.settings.heartbeat_timeout),
                retry_policy=tool_retry(idempotent))
        except ActivityError as exc:
            if idempotent:
                return Observation(call_id=call.id, tool_name=call.name, is_error=True,
                                   output=f"The tool '{call.name}' could not be run: its "
                                          f"workers kept failing ({exc.cause or exc}).")
            raise ToolInterrupted(call.id) from None

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        """The history is the checkpoint; at a step boundary, maybe continue as new."""
        if call is None and session.phase == "model" and not session.done:
            info = workflow.info()
            if info.is_continue_as_new_suggested() or (
                    info.get_current_history_size() > self.settings.rollover_bytes):
                raise Rollover

    async def wait_for_decision(self, pending: list[PendingApproval]) -> dict[str, Decision]:
        """Wait until every pending call is decided; past the approval timeout, deny the
        undecided ones (the model is told why)."""
        flow, ids = self.flow, [item.call_id for item in pending]
        flow.start_waiting(pending)
        timeout = self.settings.approval_timeout
        try:
            await workflow.wait_condition(lambda: all(i in flow.decisions for i in ids),
                                          timeout=timedelta(seconds=timeout) if timeout else None)
        except asyncio.TimeoutError:
            for call_id in ids:
                flow.decisions.setdefault(call_id, Decision(
                    approved=False, reason=f"no decision within {timeout:g} s"))
        finally:
            flow.stop_waiting()
        return {call_id: flow.decisions.pop(call_id) for call_id in ids}

    def now(self) -> float:
        return workflow.now().timestamp()

    def new_id(self) -> str:
        return workflow.uuid4().hex[:16]

    @property
    def observed(self) -> bool:
        return not workflow.unsafe.is_replaying()

    def emit(self, event: ev.Event) -> None:
        """Events go to the worker's log (never while replaying: they were seen then)."""
        workflow.logger.debug("session %s step %d: %s", event.session_id, event.step,
                              event.kind)


@workflow.defn(name=WORKFLOW_NAME, failure_exception_types=[ValidationError, UserError])
class SessionWorkflow:
    """One session, from its question to its final status."""

    @workflow.init
    def __init__(self, start: SessionInput) -> None:
        self.session, self.settings, self.runs = start.session, start.settings, start.runs
        self.decisions: dict[str, Decision] = {}
        self.pending: list[PendingApproval] = []
        self.early: dict[str, Decision] = {}
        """Signalled decisions on calls not yet waiting (kept, used when they are)."""

    @workflow.run
    async def run(self, start: SessionInput) -> RunResult:
        profile = start.profile
        if profile is None:
            profile = await workflow.execute_activity(
                DESCRIBE, result_type=WorkerProfile,
                start_to_close_timeout=timedelta(seconds=60))
        logic = StepLogic(rules_for(self.settings, profile),
                          WorkflowEffects(self, ToolCatalog(profile.tools)))
        session = self.session
        try:
            await self._steps(logic, session)
        except Rollover:
            await workflow.wait_condition(workflow.all_handlers_finished)
            logic.settle(session)
            carried = SessionInput(session=session, settings=self.settings, profile=profile,
                                   runs=self.runs + 1)
            try:
                check_size(carried, "the session carried to the next run")
            except PayloadTooLarge as exc:
                self._too_large(logic, exc)
            workflow.continue_as_new(carried)
        except PayloadTooLarge as exc:
            self._too_large(logic, exc)
        logic.settle(session)
        workflow.upsert_memo({"status": session.status})
        return self._result(logic.finished(session))

    async def _steps(self, logic: StepLogic, session: AgentSession) -> None:
        """The step logic until the run stops, ended with a status whatever happens."""
        timeout = self.settings.timeout
        deadline = None if timeout is None else logic.fx.now() + timeout
        try:
            while True:  # one deadline for the run, however often a tool is interrupted
                left = None if deadline is None else max(0.0, deadline - logic.fx.now())
                try:
                    await asyncio.wait_for(logic.run(session), left)
                    return
                except ToolInterrupted:
                    continue  # the next run recovers the call as a resumed run does
        except asyncio.TimeoutError:
            logic.stop(session, "timeout", f"the run exceeded its deadline of {timeout} s")
        except asyncio.CancelledError:
            if session.status not in ("cancelled",) and session.phase != "done":
                session.transition("cancelled", "cancelled by a person", at=logic.fx.now())
        except (Rollover, PayloadTooLarge, workflow.NondeterminismError):
            raise
        except Exception as exc:  # a bug of ours must still end the run with a status
            workflow.logger.exception("internal error in session %s", session.id)
            logic.stop(session, "error", f"internal error: {type(exc).__name__}: {exc}")

    def _too_large(self, logic: StepLogic, exc: PayloadTooLarge) -> NoReturn:
        """Fail the workflow for good: retrying cannot make a payload smaller."""
        logic.stop(self.session, "error", str(exc))
        workflow.upsert_memo({"status": "error"})
        raise ApplicationError(f"session {self.session.id}: {exc}", type=PAYLOAD_TOO_LARGE,
                               non_retryable=True) from None

    def _result(self, result: RunResult) -> RunResult:
        """The result, as much of it as fits in one payload (the session query has it all)."""
        for keep in ("all", "steps", "none"):
            if keep != "all":
                result.messages = []
            if keep == "none":
                result.steps = []
            try:
                check_size(result, "the result")
                return result
            except PayloadTooLarge:
                continue
        return result

    # -- approvals ------------------------------------------------------------------------

    def start_waiting(self, pending: list[PendingApproval]) -> None:
        self.pending = list(pending)
        for item in pending:
            early = self.early.pop(item.call_id, None)
            if early is not None:
                self.decisions.setdefault(item.call_id, early)
        workflow.upsert_memo({"status": "awaiting_approval"})

    def stop_waiting(self) -> None:
        self.pending = []
        workflow.upsert_memo({"status": "running"})

    def _undecided(self) -> list[PendingApproval]:
        return [item for item in self.pending if item.call_id not in self.decisions]

    @workflow.update(name="decide")
    def decide(self, decision: DecisionInput) -> DecisionOutcome:
        chosen = [item.call_id for item in self._chosen(decision)]
        for call_id in chosen:
            self.decisions[call_id] = Decision(approved=decision.approved,
                                               reason=decision.reason)
        return DecisionOutcome(decided=chosen)

    @decide.validator
    def _check_decision(self, decision: DecisionInput) -> None:
        self._chosen(decision)

    def _chosen(self, decision: DecisionInput) -> list[PendingApproval]:
        """The waiting calls a decision is about; ValueError (the update is rejected) for a
        session that is not waiting, an unknown call id, or a call decided already."""
        if not self.pending:
            raise ValueError(f"session {self.session.id} is not awaiting approval (status: "
                             f"{self.session.status})")
        undecided = self._undecided()
        if decision.call_id is None:
            if not undecided:
                raise ValueError(f"every waiting call of session {self.session.id} was "
                                 "decided already")
            return undecided
        if decision.call_id in self.decisions:
            raise ValueError(f"call {decision.call_id!r} was decided already")
        chosen = [item for item in undecided if item.call_id == decision.call_id]
        if not chosen:
            ids = ", ".join(item.call_id for item in undecided) or "none"
            raise ValueError(f"session {self.session.id} has no call {decision.call_id!r} "
                             f"awaiting approval (waiting: {ids})")
        return chosen

    @workflow.signal(name="decide_signal")
    def decide_signal(self, decision: DecisionInput) -> None:
        """Fire and forget: a decision on a call not waiting yet is kept for when it is;
        one the update would reject is dropped (and logged)."""
        if decision.call_id is not None and not self.pending:
            self.early[decision.call_id] = Decision(approved=decision.approved,
                                                    reason=decision.reason)
            return
        try:
            chosen = self._chosen(decision)
        except ValueError as exc:
            workflow.logger.warning("decision signal ignored: %s", exc)
            return
        for item in chosen:
            self.decisions[item.call_id] = Decision(approved=decision.approved,
                                                    reason=decision.reason)

    # -- queries --------------------------------------------------------------------------

    @workflow.query(name="status")
    def status(self) -> SessionView:
        session = self.session
        waiting = bool(self.pending)
        names = ", ".join(f"{p.tool} ({p.call_id})" for p in self._undecided())
        return SessionView(
            session_id=session.id,
            status="awaiting_approval" if waiting else session.status,
            reason=f"waiting for approval of {names}" if waiting else session.reason,
            question=session.question, steps=len(session.steps),
            final_answer=session.final_answer, pending=self._undecided(), runs=self.runs)

    @workflow.query(name="pending")
    def pending_approvals(self) -> list[PendingApproval]:
        return self._undecided()

    @workflow.query(name="session")
    def trace(self) -> AgentSession:
        """The whole session: every step, call, observation and transition."""
        return self.session

    @workflow.query(name="progress")
    def progress(self, after: int) -> Progress:
        """The status, and the steps from index ``after`` (inclusive) on."""
        return Progress(view=self.status(),
                        steps=[s for s in self.session.steps if s.index >= after])

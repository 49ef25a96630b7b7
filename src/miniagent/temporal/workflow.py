"""The session workflow: the run shell of :mod:`miniagent.core.runtime.run`, run as Temporal
workflow code.

There is no second loop and no second run shell here. :class:`WorkflowEffects` implements the
step logic's :class:`~miniagent.core.runtime.effects.Effects` and nothing else: a model call and a
tool call are activities, time is ``workflow.now()``, ids come from ``workflow.uuid4()``, the
checkpoint is the workflow's own history (at a step boundary it may ask to continue as new:
:class:`~miniagent.core.errors.Rollover`), waiting for a person is ``workflow.wait_condition`` on
the decisions the update and signal handlers record, and events go to a bounded log that
clients follow (the ``events`` query). A tool activity that fails for good on a non-idempotent
tool raises :class:`~miniagent.core.errors.ToolInterrupted`: its outcome is unknown, and the step
logic recovers it as after a crash.

The agent arrives as its :class:`~miniagent.core.runtime.run.AgentSpec`; its rules are built by the
same :func:`~miniagent.core.runtime.run.rules_for` as in process, over the tools this worker serves
(:mod:`miniagent.temporal.workers`), so approvals are judged where the tools live.

The module is safe for Temporal's sandbox: miniagent's modules and pydantic are passed
through, and nothing here runs at import time beyond definitions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from miniagent.core.errors import (
        DecisionError,
        PayloadTooLarge,
        Rollover,
        ToolInterrupted,
        UserError,
    )
    from miniagent.core.runtime import events as ev
    from miniagent.core.runtime.loop import run_session
    from miniagent.core.runtime.run import AgentSpec, rules_for, with_small_model_aids
    from miniagent.core.session import AgentSession, check_edit, storable
    from miniagent.core.tools.tool import shorten
    from miniagent.core.types import (
        CallRecord,
        Decision,
        ModelRequest,
        ModelResponse,
        Observation,
        PendingApproval,
        RunResult,
        ToolCall,
        ToolContext,
        WaitReporter,
        current_reporter,
    )
    from miniagent.temporal.activities import (
        GENERATE,
        MODEL_WAIT,
        RUN_TOOL,
        SLOT_WAITING,
        SMALL_MODEL,
    )
    from miniagent.temporal.contracts import (
        DecisionInput,
        DecisionOutcome,
        EventPage,
        SessionInput,
        SessionView,
        SlotWait,
        ToolInput,
    )
    from miniagent.temporal.converter import encoded_size
    from miniagent.temporal.events import EventLog, event_record
    from miniagent.temporal.faults import (
        PAYLOAD_LIMIT,
        PAYLOAD_TOO_LARGE,
        model_error,
        model_retry,
        tool_retry,
        tool_time,
    )
    from miniagent.temporal.workers import Served, served

WORKFLOW_NAME = "MiniAgentSession"
TOOL_MARGIN = 30.0
"""Seconds a tool activity gets beyond the tool's own timeout (the toolbox enforces that one
and answers with an error observation; this bounds a worker that hangs)."""
SLOT_WAIT_CHARS = 300
"""The most characters of a ``slot_waiting`` signal's ``what`` and ``reason`` kept (the worker
sends far fewer: a tool's name or a model endpoint, and a limit)."""
SLOT_WAIT = 3600.0
"""Seconds a call of a tool with ``max_concurrency`` may wait for a slot in its worker, on top
of its own time, when the run has no deadline."""


def check_size(value: Any, what: str) -> None:
    """Refuse ``value`` when its payload would be over Temporal's 2 MB limit."""
    if isinstance(value, ModelRequest) and _rough_size(value) < PAYLOAD_LIMIT // 4:
        return  # far below the limit: not worth encoding the transcript once more
    payload = workflow.payload_converter().to_payloads([value])[0]
    size = encoded_size(payload, PAYLOAD_LIMIT)
    if size > PAYLOAD_LIMIT:
        raise PayloadTooLarge(f"{what} is {size:,} bytes encoded, over Temporal's "
                              f"{PAYLOAD_LIMIT:,}-byte payload limit")


DECISION_REFUSED = "DecisionRefused"
"""The type of the application error that rejects a decision update."""


def _refused(reason: str) -> ApplicationError:
    """A decision the workflow rejects: non-retryable (asking again gets the same answer),
    its message the reason alone, so a client or the Temporal UI shows just that."""
    return ApplicationError(reason, type=DECISION_REFUSED, non_retryable=True)


def _reraise_cancellation(exc: ActivityError) -> None:
    """An activity cancelled because the run was (its deadline, a person): the run's
    cancellation, not a failure of the model or the tool."""
    if isinstance(exc.cause, CancelledError):
        raise asyncio.CancelledError from None


def _rough_size(request: ModelRequest) -> int:
    """About the JSON size of a request: its texts, which dominate it."""
    return sum(len(str(m.get("content") or "")) + 64 for m in request.messages) + len(
        request.grammar or "") + len(str(request.tools or ""))


class WorkflowEffects:
    """The step logic's effects, performed as workflow code (see the module docstring)."""

    def __init__(self, flow: SessionWorkflow, tools: Served) -> None:
        self.flow, self.tools, self.options = flow, tools.tools, flow.options
        self.observe = tools.observe

    async def generate(self, request: ModelRequest) -> ModelResponse:
        check_size(request, "the model request (the whole transcript)")
        try:
            with self.flow.relaying_waits(MODEL_WAIT):
                return await workflow.execute_activity(
                    GENERATE, request, result_type=ModelResponse,
                    start_to_close_timeout=timedelta(seconds=self.options.model_timeout),
                    retry_policy=model_retry(self.options.model_attempts))
        except ActivityError as exc:
            cause = exc.cause
            _reraise_cancellation(exc)
            if isinstance(cause, ApplicationError) and cause.type == PAYLOAD_TOO_LARGE:
                raise PayloadTooLarge(cause.message) from None
            raise model_error(exc) from None

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        idempotent = self.tools.is_idempotent(call.name)
        own = self.tools.timeout_of(call.name)
        retry = self.tools.retry_of(call.name, context)
        work = ToolInput(call=call, session_id=context.session_id, step=context.step,
                         metadata=context.metadata, decision=context.decision,
                         tokens_left=context.tokens_left, deadline=context.deadline,
                         steps_left=context.steps_left, default_retry=context.default_retry)
        check_size(work, f"the arguments of call {call.id}")
        key = f"step{context.step}-{call.id}"
        budget = tool_time(own, retry) + TOOL_MARGIN + self._slot_wait(call, context)
        try:
            with self.flow.relaying_waits(key):
                return await workflow.execute_activity(
                    RUN_TOOL, work, result_type=Observation, activity_id=key,
                    start_to_close_timeout=timedelta(seconds=budget),
                    heartbeat_timeout=timedelta(seconds=self.options.heartbeat_timeout),
                    retry_policy=tool_retry(idempotent, retry))
        except ActivityError as exc:
            _reraise_cancellation(exc)
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == PAYLOAD_TOO_LARGE:
                raise PayloadTooLarge(cause.message) from None
            if idempotent:
                return Observation(call_id=call.id, tool_name=call.name, is_error=True,
                                   output=f"The tool '{call.name}' could not be run: its "
                                          f"workers kept failing ({exc.cause or exc}).")
            raise ToolInterrupted(call.id) from None

    def _slot_wait(self, call: ToolCall, context: ToolContext) -> float:
        """How long a call of a tool with ``max_concurrency`` may wait for a slot in its worker
        (the rest of the run, or :data:`SLOT_WAIT`): the wait is not the tool's time, and the
        heartbeats that go on meanwhile still tell a dead worker apart."""
        tool = self.tools.get(call.name)
        if tool is None or tool.max_concurrency is None:
            return 0.0
        if context.deadline is None:
            return SLOT_WAIT
        return max(0.0, context.deadline - self.now())

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        """The history is the checkpoint; at a step boundary, maybe continue as new."""
        if call is None and session.phase == "model" and not session.done:
            info = workflow.info()
            if info.is_continue_as_new_suggested() or (
                    info.get_current_history_size() > self.options.rollover_bytes):
                raise Rollover

    async def wait_for_decision(self, pending: list[PendingApproval], until: float | None
                                ) -> dict[str, Decision]:
        """Wait (durably: days if need be) until every pending call is decided, or ``until``;
        the step logic denies what is undecided then."""
        flow, ids = self.flow, [item.call_id for item in pending]
        flow.start_waiting(pending)
        left = None if until is None else timedelta(seconds=max(0.0, until - self.now()))
        try:
            await workflow.wait_condition(lambda: all(i in flow.decisions for i in ids),
                                          timeout=left)
        except asyncio.TimeoutError:
            pass
        finally:
            flow.stop_waiting()
        return {i: flow.decisions.pop(i) for i in ids if i in flow.decisions}

    def now(self) -> float:
        return workflow.now().timestamp()

    def new_id(self) -> str:
        return workflow.uuid4().hex[:16]

    @property
    def observed(self) -> bool:
        return True  # the log is rebuilt on replay too: the events are deterministic

    def emit(self, event: ev.Event) -> None:
        self.flow.log.append(event)
        if self.observe is not None and not workflow.unsafe.is_replaying():
            # the worker's metrics: outside the workflow's state, so a replay (which skips
            # this) and a metrics failure change nothing the workflow decides
            with workflow.unsafe.sandbox_unrestricted():
                try:
                    self.observe(event)
                except Exception as exc:
                    workflow.logger.warning("metrics: an event was not counted: %s", exc)


@workflow.defn(name=WORKFLOW_NAME, failure_exception_types=[ValidationError, UserError])
class SessionWorkflow:
    """One session, from its question to its final status."""

    @workflow.init
    def __init__(self, start: SessionInput) -> None:
        self.session, self.spec, self.options = start.session, start.spec, start.options
        self.runs = start.runs
        self.decisions: dict[str, Decision] = {}
        self.pending: list[PendingApproval] = []
        self.early: dict[str, Decision] = {}
        """Signalled decisions on calls not yet waiting (kept, used when they are)."""
        self.log = EventLog(self.options.event_log)
        self.waits: dict[str, WaitReporter] = {}
        """The step logic's wait reporters of the activities under way, by activity key."""

    async def _with_model_aids(self, spec: AgentSpec) -> AgentSpec:
        """``spec`` with the small-model aids its client left to the workers' model decided,
        once per session (continue-as-new carries the decided spec): the worker's answer is
        a local activity's, kept in the history, so a replay on a worker with another model
        decides the same. A history from before this question was asked replays without it."""
        if not spec.aids_from_model or not workflow.patched(SMALL_MODEL):
            return spec
        answer = await workflow.execute_local_activity(
            SMALL_MODEL, start_to_close_timeout=timedelta(seconds=30))
        # the aids the model needs by name; a history from before they were named says
        # whether the model is small (every aid, or none)
        names = (() if answer is False else None) if isinstance(answer, bool) else tuple(
            str(name) for name in answer or ())
        if names == ():
            return spec.replace(aids_from_model=())
        return with_small_model_aids(spec, names)

    @workflow.run
    async def run(self, start: SessionInput) -> RunResult:
        tools = served(workflow.info().task_queue)
        self.spec = await self._with_model_aids(self.spec)
        rules = rules_for(self.spec, tools.tools, tool_mode=tools.tool_mode,
                          native_tools=tools.native_tools)
        try:
            result = await run_session(self.session, rules, WorkflowEffects(self, tools),
                                       cancel_ends=True)
        except Rollover:
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(SessionInput(session=self.session, spec=self.spec,
                                                  options=self.options, runs=self.runs + 1))
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result(result)

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
            if early is None:
                continue
            try:
                early.arguments = self._edit(item.call_id, early.approved, early.arguments)
            except ApplicationError as exc:  # a refused edit: the call waits for a person
                workflow.logger.warning("decision signal ignored: %s", exc.message)
                continue
            self.decisions.setdefault(item.call_id, early)
        workflow.upsert_memo({"status": "awaiting_approval"})

    def stop_waiting(self) -> None:
        self.pending = []
        workflow.upsert_memo({"status": "running"})

    def _undecided(self) -> list[PendingApproval]:
        return [item for item in self.pending if item.call_id not in self.decisions]

    @workflow.update(name="decide")
    def decide(self, decision: DecisionInput) -> DecisionOutcome:
        chosen = self._decisions(decision)
        self.decisions.update(chosen)
        return DecisionOutcome(decided=list(chosen))

    @decide.validator
    def _check_decision(self, decision: DecisionInput) -> None:
        self._decisions(decision)

    def _decisions(self, decision: DecisionInput) -> dict[str, Decision]:
        """What ``decision`` decides, by call id; a refusal as :meth:`_chosen` says, or for
        edited arguments that are not for one approved call or do not fit its schema."""
        chosen = [item.call_id for item in self._chosen(decision)]
        edited = None
        if decision.arguments is not None:
            if len(chosen) != 1:
                raise _refused(f"edited arguments are for one call: name it (waiting: "
                               f"{', '.join(chosen)})")
            edited = self._edit(chosen[0], decision.approved, decision.arguments)
        return {call_id: Decision(approved=decision.approved, reason=decision.reason,
                                  arguments=edited) for call_id in chosen}

    def _edit(self, call_id: str, approved: bool, arguments: dict[str, Any] | None
              ) -> dict[str, Any] | None:
        """The checked edit of the waiting call ``call_id`` (see
        :mod:`miniagent.core.session`); a refusal when it does not fit."""
        if arguments is None:
            return None
        if not approved:
            raise _refused("edited arguments go with an approval, not a denial")
        record = next(r for r in self.session.open_calls() if r.call.id == call_id)
        try:
            return check_edit(record, arguments)
        except DecisionError as exc:
            raise _refused(str(exc)) from None

    def _chosen(self, decision: DecisionInput) -> list[PendingApproval]:
        """The waiting calls a decision is about; a refusal (the update is rejected) for a
        session that is not waiting, an unknown call id, or a call decided already."""
        if not self.pending:
            raise _refused(f"session {self.session.id} is not awaiting approval (status: "
                           f"{self.session.status})")
        undecided = self._undecided()
        if decision.call_id is None:
            if not undecided:
                raise _refused(f"every waiting call of session {self.session.id} was "
                               "decided already")
            return undecided
        if decision.call_id in self.decisions:
            raise _refused(f"call {decision.call_id!r} was decided already")
        chosen = [item for item in undecided if item.call_id == decision.call_id]
        if not chosen:
            ids = ", ".join(item.call_id for item in undecided) or "none"
            raise _refused(f"session {self.session.id} has no call {decision.call_id!r} "
                           f"awaiting approval (waiting: {ids})")
        return chosen

    @workflow.signal(name="decide_signal")
    def decide_signal(self, decision: DecisionInput) -> None:
        """Fire and forget: a decision on a call not waiting yet is kept for when it is;
        one the update would reject is dropped (and logged)."""
        if decision.call_id is not None and not self.pending:
            self.early[decision.call_id] = Decision(approved=decision.approved,
                                                    reason=decision.reason,
                                                    arguments=decision.arguments)
            return
        try:
            chosen = self._decisions(decision)
        except ApplicationError as exc:  # a refusal: the signal has no caller to tell
            workflow.logger.warning("decision signal ignored: %s", exc.message)
            return
        self.decisions.update(chosen)

    @contextlib.contextmanager
    def relaying_waits(self, key: str) -> Iterator[None]:
        """While an activity runs, its worker's ``slot_waiting`` signals reach the reporter the
        step logic installed around the call (:mod:`miniagent.core.throttles`)."""
        reporter = current_reporter()
        if reporter is None:
            yield
            return
        self.waits[key] = reporter
        try:
            yield
        finally:
            self.waits.pop(key, None)

    @workflow.signal(name=SLOT_WAITING)
    def slot_waiting(self, wait: SlotWait) -> None:
        """A call under way waits for a slot in its worker: emitted as ``slot_waiting`` (a
        signal for a call already over is dropped). Any client may send this signal: its texts
        are cut to :data:`SLOT_WAIT_CHARS` and made storable before they reach the event log."""
        reporter = self.waits.get(wait.key)
        if reporter is not None:
            reporter(storable(shorten(wait.what, SLOT_WAIT_CHARS)),
                     storable(shorten(wait.reason, SLOT_WAIT_CHARS)))

    # -- queries --------------------------------------------------------------------------

    @workflow.query(name="status")
    def status(self) -> SessionView:
        session = self.session
        return SessionView(
            session_id=session.id, status=session.status, reason=session.reason,
            question=session.question, steps=len(session.steps),
            final_answer=session.final_answer, pending=self._undecided(), runs=self.runs)

    @workflow.query(name="pending")
    def pending_approvals(self) -> list[PendingApproval]:
        return self._undecided()

    @workflow.query(name="session")
    def trace(self) -> AgentSession:
        """The whole session: every step, call, observation and transition."""
        return self.session

    @workflow.query(name="spec")
    def agent_spec(self) -> AgentSpec:
        """The agent's spec the session runs with (a fork of it runs with it too)."""
        return self.spec

    @workflow.query(name="events")
    def events(self, after: int) -> EventPage:
        """The events of this run from index ``after`` on (a page of them), and the status."""
        start, chosen = self.log.since(after)
        return EventPage(view=self.status(), records=[event_record(e) for e in chosen],
                         start=start, next=start + len(chosen), runs=self.runs)

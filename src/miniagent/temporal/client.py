"""Sessions on a Temporal cluster, from the client side.

:class:`TemporalSessions` starts, reads, decides, cancels and lists the sessions of a namespace
(a session's id is its workflow id); :class:`~miniagent.temporal.agent.TemporalAgent` runs an
agent's sessions through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import CancelledError, TerminatedError
from temporalio.service import RPCError, RPCStatusCode

from miniagent.core.errors import (
    ConfigError,
    DecisionError,
    PayloadTooLarge,
    SessionBusy,
    SessionNotFound,
    TurnRefused,
    UserError,
)
from miniagent.core.runtime.fork import fork_session
from miniagent.core.runtime.run import AgentSpec
from miniagent.core.session import FINAL, AgentSession, storable
from miniagent.core.store.base import random_id
from miniagent.core.types import RunResult
from miniagent.temporal.contracts import (
    DecisionInput,
    DecisionOutcome,
    EventPage,
    SessionInput,
    SessionView,
    TemporalOptions,
)
from miniagent.temporal.converter import data_converter
from miniagent.temporal.faults import PAYLOAD_LIMIT
from miniagent.temporal.workflow import WORKFLOW_NAME, SessionWorkflow

__all__ = ["DEFAULT_TASK_QUEUE", "TemporalSessions", "connect"]

log = logging.getLogger("miniagent")

DEFAULT_TASK_QUEUE = "miniagent"
WORKER_WAIT = 3.0
"""Seconds to wait for a worker to show up on a task queue before saying there is none."""

Change = Literal["progress", "memo", "closed"]
_CLOSED = {EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
           EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
           EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
           EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
           EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED}
_CHANGES: dict[int, Change] = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "progress",
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: "memo",
    **{kind: "closed" for kind in _CLOSED},
}


async def connect(address: str, namespace: str = "default") -> Client:
    """A client for ``HOST:PORT`` with miniagent's data converter.

    Raises:
        ConfigError: nothing answers there (one line, for the CLI).
    """
    try:
        return await Client.connect(address, namespace=namespace,
                                    data_converter=data_converter())
    except (RuntimeError, RPCError) as exc:
        raise ConfigError(f"cannot reach Temporal at {address}: {exc}") from None


class TemporalSessions:
    """miniagent sessions on one Temporal namespace."""

    def __init__(self, client: Client, task_queue: str = DEFAULT_TASK_QUEUE) -> None:
        self.client, self.task_queue = client, task_queue
        self._started: dict[str, WorkflowHandle[Any, RunResult]] = {}
        """Handles of the sessions started here (a test environment skips time on them)."""

    async def start(self, question: str, spec: AgentSpec | None = None, *,
                    options: TemporalOptions | None = None,
                    metadata: dict[str, Any] | None = None,
                    session_id: str | None = None) -> str:
        """Start a session; returns its id (the workflow id).

        Raises:
            UserError: a session with that id exists (or Temporal refused the start).
        """
        session = AgentSession.start(storable(question), id=session_id or random_id(),
                                     at=time.time(), metadata=metadata)
        await self._start(SessionInput(session=session, spec=spec or AgentSpec(),
                                       options=options or TemporalOptions()))
        return session.id

    async def next_turn(self, session_id: str, question: str, spec: AgentSpec | None = None,
                        *, options: TemporalOptions | None = None) -> None:
        """Ask ``question`` as the next turn of a session whose workflow has closed: the
        workflow starts again under the same id, from the session as it ended (each turn is
        one workflow execution; a turn that has not ended is refused).

        Raises:
            SessionNotFound: no session of that id was ever started here.
            SessionBusy: the session's workflow is still running (a turn, or a wait for a
                person: then TurnRefused).
            TurnRefused: the session cannot take a new turn (cancelled, calls still open).
        """
        view = await self.view(session_id)
        closed = await self._closed_as(session_id)
        if closed in (WorkflowExecutionStatus.CANCELED, WorkflowExecutionStatus.TERMINATED):
            raise TurnRefused(f"session {session_id} was cancelled: start a new session")
        if closed is not None and closed != WorkflowExecutionStatus.COMPLETED:
            raise TurnRefused(f"session {session_id}'s workflow ended "
                              f"{closed.name.lower()}: start a new session")
        if closed is None:
            if view.status == "awaiting_approval":
                raise TurnRefused(f"session {session_id} is waiting for approval: approve or "
                                  "deny its calls before asking a new question")
            raise SessionBusy(f"session {session_id} is running a turn on Temporal: wait for "
                              "it to end before asking a new question")
        session = await self.session(session_id)
        session.new_turn(storable(question), at=time.time())
        await self._start(SessionInput(session=session, spec=spec or AgentSpec(),
                                       options=options or TemporalOptions(),
                                       runs=view.runs + 1))

    async def fork(self, session_id: str, at_step: int, spec: AgentSpec | None = None, *,
                   options: TemporalOptions | None = None) -> AgentSession:
        """Fork a session after its step ``at_step`` (see :mod:`miniagent.core.runtime.fork`):
        the parent read through its workflow's queries, the fork started as a workflow of its
        own with ``spec`` (default: the parent's), which goes on at once (one that waits for a
        person asks again; one whose turn ended ends there, ready for a next question).
        Returns the fork as its workflow started.

        Raises:
            SessionNotFound: no such session; UserError: ``at_step`` out of range.
        """
        child = fork_session(await self.session(session_id), at_step, id=random_id(),
                             at=time.time())
        spec = spec or await self._query(session_id, SessionWorkflow.agent_spec)
        if child.status not in FINAL and child.status != "running" and child.phase == "tools":
            # calls open at the fork's last step are the workflow's to settle and wait on
            child.transition("running", "its workflow goes on from the fork", at=time.time())
        await self._start(SessionInput(session=child, spec=spec,
                                       options=options or TemporalOptions()))
        return child

    async def _closed_as(self, session_id: str) -> WorkflowExecutionStatus | None:
        """How the session's latest workflow execution closed; None while it runs."""
        try:
            described = await self._handle(session_id).describe()
        except RPCError as exc:
            raise _not_found(session_id, exc) from None
        status = described.status
        return None if status in (None, WorkflowExecutionStatus.RUNNING) else status

    async def _start(self, start: SessionInput) -> None:
        session = start.session
        size = sum(p.ByteSize() for p in
                   self.client.data_converter.payload_converter.to_payloads([start]))
        if size > PAYLOAD_LIMIT:
            raise PayloadTooLarge(f"the session's start (its history and metadata) is "
                                  f"{size:,} bytes, over Temporal's {PAYLOAD_LIMIT:,}-byte "
                                  "payload limit")
        try:
            self._started[session.id] = await self.client.start_workflow(
                SessionWorkflow.run, start, id=session.id, task_queue=self.task_queue,
                memo={"question": session.question[:200], "status": "running"})
        except RPCError as exc:
            if "already started" in str(exc).lower():
                raise SessionBusy(f"session {session.id} is running on Temporal already: "
                                  "wait for its turn to end") from None
            raise UserError(f"Temporal refused to start session {session.id}: {exc}") from None

    async def has_workers(self, task_queue: str | None = None, *, wait: float = WORKER_WAIT
                          ) -> bool:
        """Whether a worker polls ``task_queue`` (this one's by default), waiting up to
        ``wait`` seconds for one that is just starting."""
        request = DescribeTaskQueueRequest(
            namespace=self.client.namespace,
            task_queue=TaskQueue(name=task_queue or self.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
        deadline = time.monotonic() + wait
        while True:
            try:
                answer = await self.client.workflow_service.describe_task_queue(request)
            except RPCError as exc:
                if exc.status == RPCStatusCode.UNIMPLEMENTED:
                    return True  # a server that cannot tell (the time-skipping test server)
                raise ConfigError(f"Temporal cannot describe task queue "
                                  f"{request.task_queue.name!r}: {exc}") from None
            if answer.pollers:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)

    def _handle(self, session_id: str) -> WorkflowHandle[Any, RunResult]:
        """The session's latest workflow execution (a later turn's too, whoever started it)."""
        return self.client.get_workflow_handle(session_id, result_type=RunResult)

    async def _waitable(self, session_id: str) -> WorkflowHandle[Any, RunResult]:
        """The handle to wait on: the one this client started (a test environment skips time
        on it) while its turn is the latest, else the latest execution's."""
        started = self._started.get(session_id)
        if started is None:
            return self._handle(session_id)
        described = await self._handle(session_id).describe()
        first = described.raw_description.workflow_execution_info.first_run_id
        if first and first != started.first_execution_run_id:
            del self._started[session_id]  # another client started a later turn
            return self._handle(session_id)
        return started

    async def result(self, session_id: str) -> RunResult:
        """Wait for the session's run to end (across continue-as-new); always a result."""
        try:
            handle = await self._waitable(session_id)
            result: RunResult = await handle.result()
            return result
        except WorkflowFailureError as exc:
            if isinstance(exc.cause, CancelledError):  # the workflow recorded it: its result
                with contextlib.suppress(UserError):
                    return (await self.session(session_id)).result()
            return _failed(session_id, exc)
        except RPCError as exc:
            raise _not_found(session_id, exc) from None

    async def view(self, session_id: str) -> SessionView:
        return await self._query(session_id, SessionWorkflow.status)

    async def session(self, session_id: str) -> AgentSession:
        return await self._query(session_id, SessionWorkflow.trace)

    async def events(self, session_id: str, after: int) -> EventPage:
        return await self._query(session_id, SessionWorkflow.events, after)

    async def _query(self, session_id: str, query: Callable[..., Any], *args: Any) -> Any:
        """A query, asked again (up to 3 times, a second apart) when the server gave up on it
        for want of a worker (a worker killed and restarting): a query only reads."""
        for attempt in range(4):
            try:
                return await self._handle(session_id).query(query, *args)
            except WorkflowQueryFailedError as exc:
                raise UserError(f"session {session_id} could not be read: {exc}") from None
            except RPCError as exc:
                if attempt == 3 or exc.status not in _NO_WORKER:
                    raise _not_found(session_id, exc) from None
            await asyncio.sleep(1.0)
        raise AssertionError("unreachable")

    async def decide(self, session_id: str, approved: bool, call_id: str | None = None,
                     reason: str | None = None, *,
                     arguments: dict[str, Any] | None = None) -> list[str]:
        """Approve or deny one waiting call (or all); returns the decided call ids.
        ``arguments`` approves one call with them instead of the model's.

        Raises:
            DecisionError: the session is not waiting, has no such undecided call, or the
                workflow refused the edited arguments (nothing was decided).
        """
        try:
            outcome: DecisionOutcome = await self._handle(session_id).execute_update(
                SessionWorkflow.decide,
                DecisionInput(approved=approved, call_id=call_id, reason=reason,
                              arguments=arguments))
        except WorkflowUpdateFailedError as exc:
            raise DecisionError(getattr(exc.cause, "message", None) or str(exc)) from None
        except RPCError as exc:
            if "already completed" in str(exc):
                raise DecisionError(f"session {session_id} is not awaiting approval: it has "
                                    "ended (see 'miniagent sessions show')") from None
            raise _not_found(session_id, exc) from None
        return outcome.decided

    async def signal_decision(self, session_id: str, approved: bool,
                              call_id: str | None = None, reason: str | None = None, *,
                              arguments: dict[str, Any] | None = None) -> None:
        """Fire and forget: a decision the workflow applies when it can (see the signal; an
        edit that does not fit is dropped there, and the call keeps waiting)."""
        await self._handle(session_id).signal(
            SessionWorkflow.decide_signal,
            DecisionInput(approved=approved, call_id=call_id, reason=reason,
                          arguments=arguments))

    async def cancel(self, session_id: str, reason: str = "cancelled by a person") -> str:
        """End the session: a Temporal cancellation, which its workflow records (status
        ``cancelled``, Temporal's Canceled); with no worker to record it, the workflow is
        terminated instead. Returns ``cancelling`` or ``terminated``.

        Raises:
            UserError: the session has ended already.
        """
        handle = self._handle(session_id)
        try:
            described = await handle.describe()
        except RPCError as exc:
            raise _not_found(session_id, exc) from None
        if described.status != WorkflowExecutionStatus.RUNNING:
            status = described.status.name.lower() if described.status else "closed"
            raise UserError(f"session {session_id} has ended already ({status})")
        if await self.has_workers(described.task_queue, wait=0.5):
            await handle.cancel()
            return "cancelling"
        await handle.terminate(reason=f"{reason} (no worker polls task queue "
                                      f"{described.task_queue!r})")
        return "terminated"

    async def list(self, limit: int = 50) -> list[dict[str, Any]]:
        """Sessions, most recently started first: id, status, question, start time."""
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        closed: list[tuple[dict[str, Any], str]] = []
        async for execution in self.client.list_workflows(
                f"WorkflowType = '{WORKFLOW_NAME}'", limit=limit * 4):
            if execution.id in seen or len(rows) >= limit:
                continue  # a session that continued as new is listed once, by its last run
            seen.add(execution.id)
            memo = await execution.memo()
            row = {"session_id": execution.id, "status": str(memo.get("status", "running")),
                   "question": str(memo.get("question", "")),
                   "started_at": execution.start_time.timestamp()}
            status = execution.status
            if status == WorkflowExecutionStatus.COMPLETED:
                closed.append((row, execution.id))
            elif status is not None and status != WorkflowExecutionStatus.RUNNING:
                row["status"] = _closed_status(status)
            rows.append(row)
        results = await asyncio.gather(*(self.result(sid) for _, sid in closed))
        for (row, _), result in zip(closed, results, strict=True):
            row["status"] = result.status  # the session's own final status
        return sorted(rows, key=lambda row: -row["started_at"])

    async def changes(self, session_id: str) -> AsyncIterator[Change]:
        """What happens to the session, as its history grows (long polls; follows
        continue-as-new): ``progress`` (a workflow task done), ``memo`` (it started or
        stopped waiting for a person), then ``closed``."""
        while True:
            handle = self.client.get_workflow_handle(session_id)
            renewed = False
            try:
                async for event in handle.fetch_history_events(wait_new_event=True):
                    if event.event_type == \
                            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                        renewed = True
                        continue
                    change = _CHANGES.get(event.event_type)
                    if change is not None:
                        yield change
                    if change == "closed":
                        return
            except RPCError as exc:
                raise _not_found(session_id, exc) from None
            if not renewed:
                return


def _failed(session_id: str, exc: WorkflowFailureError) -> RunResult:
    cause = exc.cause
    if isinstance(cause, CancelledError):
        return RunResult(status="cancelled", reason="cancelled by a person",
                         session_id=session_id)
    if isinstance(cause, TerminatedError):
        return RunResult(status="cancelled", reason=f"terminated: {cause.message}",
                         session_id=session_id)
    message = getattr(cause, "message", None) or str(cause or exc)
    return RunResult(status="error", reason=f"the workflow failed: {message}",
                     session_id=session_id)


def _closed_status(status: WorkflowExecutionStatus) -> str:
    if status in (WorkflowExecutionStatus.CANCELED, WorkflowExecutionStatus.TERMINATED):
        return "cancelled"
    if status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
        return "running"
    return "error"  # failed, timed out


_NO_WORKER = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED)
"""How the server ends a query no worker answered in time."""


def _not_found(session_id: str, exc: RPCError) -> Exception:
    if "not found" in str(exc).lower():
        return SessionNotFound(f"no session {session_id} on this Temporal namespace")
    return UserError(f"Temporal refused the request on session {session_id}: {exc}")

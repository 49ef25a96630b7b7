"""Sessions on a Temporal cluster, from the client side: start, follow, decide, cancel, list.

:class:`TemporalSessions` is what the CLI's ``--temporal`` commands and ``Agent(temporal=...)``
use. A session's id is its workflow id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from miniagent.durable.contracts import (
    AgentSettings,
    DecisionInput,
    DecisionOutcome,
    Progress,
    SessionInput,
    SessionView,
)
from miniagent.durable.converter import data_converter
from miniagent.durable.workflow import WORKFLOW_NAME, SessionWorkflow
from miniagent.errors import ConfigError, DecisionError, SessionNotFound, UserError
from miniagent.runtime.driver import random_id
from miniagent.session import AgentSession
from miniagent.text import storable
from miniagent.types import RunResult

if TYPE_CHECKING:
    from miniagent.agent import Agent

DEFAULT_TASK_QUEUE = "miniagent"


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


def settings_of(agent: Agent, **overrides: Any) -> AgentSettings:
    """What the workflow needs of ``agent``'s configuration."""
    caps, limits = agent.model.capabilities, agent.limits
    values: dict[str, Any] = dict(
        tool_mode=caps.tool_mode, native_tools=caps.native_tools,
        grammar=bool(getattr(agent.protocol, "grammar", getattr(
            getattr(agent.protocol, "react", None), "grammar", True))),
        instructions=agent.instructions, max_steps=limits.max_steps,
        token_budget=limits.token_budget, timeout=limits.timeout,
        max_observation_chars=limits.max_observation_chars, repeat_limit=limits.repeat_limit,
        max_calls_per_step=limits.max_calls_per_step,
        tool_concurrency=limits.tool_concurrency, temperature=agent.temperature,
        max_tokens=agent.max_tokens, on_interrupted=agent.on_interrupted,
        tool_selection=agent.tool_selection, compression=agent.compression,
        tool_choice=agent.tool_choice)
    values.update(overrides)
    return AgentSettings(**values)


class TemporalSessions:
    """miniagent sessions on one Temporal namespace."""

    def __init__(self, client: Client, task_queue: str = DEFAULT_TASK_QUEUE) -> None:
        self.client, self.task_queue = client, task_queue
        self._started: dict[str, WorkflowHandle[Any, RunResult]] = {}
        """Handles of the sessions started here (a test environment's skip time on them)."""

    async def start(self, question: str, settings: AgentSettings, *,
                    metadata: dict[str, Any] | None = None,
                    session_id: str | None = None) -> str:
        """Start a session; returns its id (the workflow id)."""
        session = AgentSession.start(storable(question), id=session_id or random_id(),
                                     at=time.time(), metadata=metadata)
        self._started[session.id] = await self.client.start_workflow(
            SessionWorkflow.run, SessionInput(session=session, settings=settings),
            id=session.id, task_queue=self.task_queue,
            memo={"question": session.question[:200], "status": "running"})
        return session.id

    def _handle(self, session_id: str) -> WorkflowHandle[Any, RunResult]:
        started = self._started.get(session_id)
        if started is not None:
            return started
        return self.client.get_workflow_handle(session_id, result_type=RunResult)

    async def result(self, session_id: str) -> RunResult:
        """Wait for the session's run to end (across continue-as-new); always a result."""
        try:
            result: RunResult = await self._handle(session_id).result()
            return result
        except WorkflowFailureError as exc:
            cause = exc.cause
            message = getattr(cause, "message", None) or str(cause or exc)
            return RunResult(status="error", reason=f"the workflow failed: {message}",
                             session_id=session_id)
        except RPCError as exc:
            raise _not_found(session_id, exc) from None

    async def view(self, session_id: str) -> SessionView:
        return await self._query(session_id, SessionWorkflow.status)

    async def session(self, session_id: str) -> AgentSession:
        return await self._query(session_id, SessionWorkflow.trace)

    async def progress(self, session_id: str, after: int) -> Progress:
        return await self._query(session_id, SessionWorkflow.progress, after)

    async def _query(self, session_id: str, query: Callable[..., Any], *args: Any) -> Any:
        try:
            return await self._handle(session_id).query(query, *args)
        except RPCError as exc:
            raise _not_found(session_id, exc) from None

    async def decide(self, session_id: str, approved: bool, call_id: str | None = None,
                     reason: str | None = None) -> list[str]:
        """Approve or deny one waiting call (or all); returns the decided call ids.

        Raises:
            DecisionError: the session is not waiting, or has no such undecided call.
        """
        try:
            outcome: DecisionOutcome = await self._handle(session_id).execute_update(
                SessionWorkflow.decide,
                DecisionInput(approved=approved, call_id=call_id, reason=reason))
        except WorkflowUpdateFailedError as exc:
            raise DecisionError(getattr(exc.cause, "message", None) or str(exc)) from None
        except RPCError as exc:
            if "already completed" in str(exc):
                raise DecisionError(f"session {session_id} is not awaiting approval: it has "
                                    "ended (see 'miniagent sessions show')") from None
            raise _not_found(session_id, exc) from None
        return outcome.decided

    async def signal_decision(self, session_id: str, approved: bool,
                              call_id: str | None = None, reason: str | None = None) -> None:
        """Fire and forget: a decision the workflow applies when it can (see the signal)."""
        await self._handle(session_id).signal(
            SessionWorkflow.decide_signal,
            DecisionInput(approved=approved, call_id=call_id, reason=reason))

    async def cancel(self, session_id: str) -> None:
        """Ask the session to stop; it ends with status ``cancelled``."""
        try:
            await self._handle(session_id).cancel()
        except RPCError as exc:
            raise _not_found(session_id, exc) from None

    async def list(self, limit: int = 50) -> list[dict[str, Any]]:
        """Sessions, most recently started first: id, status, question, start time."""
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        async for execution in self.client.list_workflows(
                f"WorkflowType = '{WORKFLOW_NAME}'", limit=limit * 4):
            if execution.id in seen or len(rows) >= limit:
                continue  # a session that continued as new is listed once, by its last run
            seen.add(execution.id)
            memo = await execution.memo()
            status = execution.status
            label = str(memo.get("status", "running"))
            if status is not None and status != WorkflowExecutionStatus.RUNNING:
                label = _closed(status, label)
            rows.append({"session_id": execution.id, "status": label,
                         "question": str(memo.get("question", "")),
                         "started_at": execution.start_time.timestamp()})
        return sorted(rows, key=lambda row: -row["started_at"])


def _closed(status: WorkflowExecutionStatus, memo_status: str) -> str:
    if status == WorkflowExecutionStatus.COMPLETED:
        return memo_status  # the session's own final status
    if status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
        return "running"
    return status.name.lower()


def _not_found(session_id: str, exc: RPCError) -> Exception:
    if "not found" in str(exc).lower():
        return SessionNotFound(f"no session {session_id} on this Temporal namespace")
    return UserError(f"Temporal refused the request on session {session_id}: {exc}")


async def run_agent(agent: Agent, question: str, *,
                    metadata: dict[str, Any] | None = None) -> RunResult:
    """``agent.arun`` on Temporal: start a session on its task queue and wait for the end."""
    if agent.temporal is None:
        raise ConfigError("the agent has no Temporal client")
    sessions = TemporalSessions(agent.temporal, agent.task_queue)
    session_id = await sessions.start(question, settings_of(agent), metadata=metadata)
    return await sessions.result(session_id)

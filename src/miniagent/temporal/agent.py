"""TemporalAgent: an :class:`~miniagent.core.agent.Agent` whose runs are sessions on a Temporal
cluster.

The wrapped agent says what the agent is (its spec, approver and subscribers; a model and tools
only where this process also serves them: :func:`~miniagent.temporal.worker.agent_worker`).
``arun`` starts a session on the task queue and follows it as in process, its events delivered
to the agent's subscribers as they happen, until it ends or waits for a person (with the pending
approvals in the result; the agent's ``approver``, if it has one, is asked first, as in process).
Following reads the workflow's history with long polls, so a client that waits costs the cluster
almost nothing, and asks the workflow for its new events only where someone subscribes.

Example::

    client = await connect("127.0.0.1:7233")
    agent = TemporalAgent(Agent(model=..., tools=[...]), client, task_queue="agents")
    async with await agent_worker(agent):      # or `miniagent worker` on other machines
        result = await agent.arun("What is 2+3?")
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio.client import Client

from miniagent._internal import defaults
from miniagent._internal.aio import SyncTwins, run_in_daemon_thread
from miniagent.core.agent import Agent, with_sources
from miniagent.core.errors import ConfigError, PayloadTooLarge, SessionNotFound, UserError
from miniagent.core.output import OutputType, typed_events, typed_result, typed_subscriber
from miniagent.core.protocol.registry import build_protocol
from miniagent.core.runtime.events import Event
from miniagent.core.runtime.stream import stream_run
from miniagent.core.session import AgentSession
from miniagent.core.types import Decision, RunResult
from miniagent.temporal.client import DEFAULT_TASK_QUEUE, TemporalSessions
from miniagent.temporal.contracts import TemporalOptions
from miniagent.temporal.events import EVENT_PAGE, event_from

if TYPE_CHECKING:
    from miniagent.core.models.base import Model
    from miniagent.core.runtime.inprocess import Subscriber
    from miniagent.core.runtime.run import AgentSpec
    from miniagent.core.tools.warmup import WarmupReport

__all__ = ["TemporalAgent"]

log = logging.getLogger("miniagent")

T = TypeVar("T")

WAIT_FIRST_LOOK, WAIT_LONGEST_LOOK = 0.25, 2.0
"""Seconds between looks at whether a followed session waits for a person (no subscribers),
doubling from the first to the longest."""


class TemporalAgent(SyncTwins):
    """``agent``'s runs as sessions on ``client``'s cluster, served by the workers of
    ``task_queue``; ``options`` set approval and activity timeouts there.

    It offers the agent's surface: ``run`` / ``arun`` (a new session, or the next turn of one),
    ``resume`` / ``aresume`` (follow a session until it stops again), ``approve`` / ``deny``
    (the session goes on at once), ``cancel`` (cancel its workflow), ``session`` (as the
    workflow holds it), ``subscribe``, ``start`` and ``aclose`` (the agent's).

    Raises:
        UserError: the agent has a store of its own (its sessions would live in the
            workflows' history, never there).
    """

    def __init__(self, agent: Agent, client: Client, *, task_queue: str = DEFAULT_TASK_QUEUE,
                 options: TemporalOptions | None = None) -> None:
        if agent.store_given:  # nothing given is silently unused
            raise UserError("an Agent on Temporal keeps its sessions in the workflows' "
                            "history: give it no store")
        self.agent, self.task_queue, self.options = agent, task_queue, options
        self.sessions = TemporalSessions(client, task_queue)
        """The sessions of the client's namespace (the inbox and the CLI read them)."""
        self.delivered: dict[str, tuple[int, int]] = {}
        """Per session: the workflow run and the index of the next event to deliver."""

    @property
    def client(self) -> Client:
        return self.sessions.client

    @property
    def spec(self) -> AgentSpec:
        """The agent's spec: what each of its sessions starts with."""
        return self.agent.spec

    @property
    def model(self) -> Model | None:
        """The agent's model (None where only the workers have one)."""
        return self.agent.model

    def subscribe(self, subscriber: Subscriber) -> None:
        """The agent's :meth:`~miniagent.core.agent.Agent.subscribe`: its runs here too."""
        self.agent.subscribe(subscriber)

    async def arun(self, question: str, *, metadata: dict[str, Any] | None = None,
                   on_event: Subscriber | None = None, session_id: str | None = None,
                   output_type: Any = None) -> RunResult:
        """Start a session of the agent's spec (or, given the id of one that exists, its
        next turn) and follow it until it stops. ``output_type`` replaces the agent's for
        this run (the workflow gets its JSON Schema with the spec; see
        :mod:`miniagent.core.output`).

        Raises:
            UserError: the agent's protocol cannot be rebuilt by a worker.
            ConfigError: no worker polls the task queue.
        """
        self._check_protocol()
        if not await self.sessions.has_workers():
            raise ConfigError(
                f"no worker polls task queue {self.task_queue!r}: start one (miniagent "
                f"worker --temporal HOST:PORT --task-queue {self.task_queue}, or "
                "miniagent.temporal.agent_worker) and run again")
        metadata = with_sources(self.agent.sources, metadata)
        typed = OutputType.of(output_type) if output_type is not None else None
        spec = self.agent.spec if typed is None else self.agent.spec.replace(
            output_schema=typed.schema)
        try:
            started = await self._next_turn(session_id, question, spec)
            if started is None:
                started = await self.sessions.start(question, spec,
                                                    options=self.options, metadata=metadata,
                                                    session_id=session_id)
        except PayloadTooLarge as exc:  # a run always ends with a status
            return RunResult(status="error", reason=str(exc), session_id=session_id or "")
        typed = typed or self.agent.output_type
        result = await self._follow(started, typed_subscriber(on_event, typed, started))
        return typed_result(result, typed)

    def astream(self, question: str, *, metadata: dict[str, Any] | None = None,
                session_id: str | None = None, output_type: Any = None
                ) -> AsyncIterator[Event]:
        """:meth:`arun`, its events yielded as the workflow's event log gives them, the last
        one a ``RunFinished`` with the result (see :meth:`Agent.astream
        <miniagent.core.agent.Agent.astream>`). Leaving the loop early stops following: the
        workflow goes on, and :meth:`aresume` follows it again."""
        typed = (OutputType.of(output_type) if output_type is not None
                 else self.agent.output_type)
        return typed_events(stream_run(partial(self.arun, question, metadata=metadata,
                                               session_id=session_id, output_type=typed),
                                       self.agent.bus), typed)

    async def afork(self, session_id: str, *, at_step: int) -> str:
        """Fork a session (see :meth:`TemporalSessions.fork`) with the agent's spec; its
        workflow starts at once on the agent's task queue. Returns the new session's id.

        Raises:
            SessionNotFound: No session has that id.
            UserError: ``at_step`` is out of range.
            ConfigError: no worker polls the task queue.
        """
        self._check_protocol()
        if not await self.sessions.has_workers():
            raise ConfigError(f"no worker polls task queue {self.task_queue!r}: start one, "
                              "then fork again (the fork's workflow starts at once)")
        child = await self.sessions.fork(session_id, at_step, self.agent.spec,
                                         options=self.options)
        return child.id

    def fork(self, session_id: str, *, at_step: int) -> str:
        """Synchronous :meth:`afork`."""
        return self._sync(self.afork(session_id, at_step=at_step))

    async def _next_turn(self, session_id: str | None, question: str, spec: AgentSpec
                         ) -> str | None:
        """The next turn of ``session_id`` started, if a session of that id exists."""
        if session_id is None:
            return None
        try:
            await self.sessions.next_turn(session_id, question, spec,
                                          options=self.options)
        except SessionNotFound:
            return None
        return session_id

    def _check_protocol(self) -> None:
        """A custom protocol runs on workers only under a registered name of its own."""
        protocol = self.agent.protocol
        if protocol is None:
            return
        built = build_protocol(self.agent.spec.protocol)
        if type(built) is not type(protocol):
            raise UserError(
                f"the agent's protocol {type(protocol).__name__} cannot run on Temporal: its "
                f"name {protocol.name!r} builds {type(built).__name__} there; give it a name "
                "of its own and register it (miniagent.register_protocol) in the workers")

    async def aresume(self, session_id: str, *, on_event: Subscriber | None = None,
                      force: bool = False) -> RunResult:
        """Follow the session until it ends or waits for a person; its events go to the
        agent's subscribers (and ``on_event``) on the way. ``force`` changes nothing here:
        the cluster's workers hold the session."""
        typed = self.agent.output_type
        return typed_result(await self._follow(session_id, typed_subscriber(
            on_event, typed, session_id)), typed)

    async def _follow(self, session_id: str, on_event: Subscriber | None) -> RunResult:
        extra = (on_event,) if on_event else ()
        if not (extra or self.agent.bus.has_subscribers):
            return await self._wait(session_id)
        runs, after = self.delivered.get(session_id, (0, 0))
        feed = _Feed(self, session_id, extra, after=after, runs=runs)
        try:
            async for change in self.sessions.changes(session_id):
                if change != "memo":
                    await feed.deliver()
                if change == "closed":
                    break
                if change == "memo" and await self._stopped(session_id, feed):
                    return (await self.sessions.session(session_id)).result()
            return await self.sessions.result(session_id)
        finally:
            self.delivered[session_id] = (feed.runs, feed.after)
            await self.agent.bus.flush()

    async def _wait(self, session_id: str) -> RunResult:
        """With nobody to show events to: one long poll for the end (what costs the cluster
        least), and now and then a look at whether the session waits for a person."""
        ended = asyncio.ensure_future(self.sessions.result(session_id))
        pause = WAIT_FIRST_LOOK
        try:
            while True:
                done, _ = await asyncio.wait({ended}, timeout=pause)
                if done:
                    return ended.result()
                pause = min(WAIT_LONGEST_LOOK, pause * 2)
                try:
                    if await self._stopped(session_id, None):
                        return (await self.sessions.session(session_id)).result()
                except UserError:
                    continue  # no worker has answered yet: look again later
        finally:
            ended.cancel()

    async def _stopped(self, session_id: str, feed: _Feed | None) -> bool:
        """Whether the run stops here: the session waits, and no approver decided it all."""
        view = await self.sessions.view(session_id)
        if view.status != "awaiting_approval":
            return False
        if feed is not None:
            await feed.deliver()
        approver = self.agent.approver
        if approver is None:
            return True
        await self.agent.bus.flush()  # the trace so far is shown before a person is asked
        undecided = 0
        for item in view.pending:
            answer = await run_in_daemon_thread(approver, item)
            if answer is None:
                undecided += 1
                continue
            decision = Decision(approved=bool(answer))
            await self.sessions.decide(session_id, decision.approved, item.call_id)
        return undecided > 0

    # -- decisions, cancelling, reading ---------------------------------------------------

    async def aapprove(self, session_id: str, call_id: str | None = None,
                       reason: str | None = None, *, arguments: dict[str, Any] | None = None,
                       force: bool = False) -> None:
        """Approve one waiting call, or all of them; the session goes on at once.
        ``arguments`` approves the call with these instead of the model's (checked against the
        tool's schema first; the model is told).

        Raises:
            DecisionError: the session is not waiting, has no such waiting call, or the edited
                arguments do not fit the tool's schema (then nothing is decided).
        """
        await self.sessions.decide(session_id, True, call_id, reason, arguments=arguments)

    async def adeny(self, session_id: str, call_id: str | None = None,
                    reason: str | None = None, *, force: bool = False) -> None:
        """Deny one waiting call, or all; the model is told it was denied and why."""
        await self.sessions.decide(session_id, False, call_id, reason)

    async def acancel(self, session_id: str, reason: str = "cancelled by a person", *,
                      force: bool = False) -> None:
        """Cancel the session's workflow (see :meth:`TemporalSessions.cancel`)."""
        await self.sessions.cancel(session_id, reason)

    async def asession(self, session_id: str) -> AgentSession:
        """The session, as the workflow holds it."""
        return await self.sessions.session(session_id)

    # -- the wrapped agent's life ---------------------------------------------------------

    async def start(self, *, timeout: float | None = defaults.WARMUP_TIMEOUT) -> WarmupReport:
        """The agent's warm-ups (:meth:`Agent.start`): what this process serves itself."""
        return await self.agent.start(timeout=timeout)

    async def aclose(self) -> None:
        """Close the agent (:meth:`Agent.aclose`); the client stays connected."""
        await self.agent.aclose()

    async def __aenter__(self) -> TemporalAgent:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@dataclass
class _Feed:
    """The session's events, read from the workflow and emitted on the agent's bus."""

    wrapper: TemporalAgent
    session_id: str
    extra: tuple[Subscriber, ...]
    after: int = 0
    runs: int = 0

    async def deliver(self) -> None:
        sessions = self.wrapper.sessions
        while True:
            try:
                page = await sessions.events(self.session_id, self.after)
            except UserError as exc:  # a closed workflow needs a worker to answer
                log.warning("events of session %s could not be read: %s", self.session_id, exc)
                return
            if page.runs != self.runs:  # continue-as-new: the new run counts from 0
                self.runs, self.after = page.runs, 0
                page = await sessions.events(self.session_id, 0)
            for record in page.records:
                event: Event | None = event_from(record)
                if event is not None:
                    self.wrapper.agent.bus.emit(event, self.extra)
            self.after = max(self.after, page.next)
            if len(page.records) < EVENT_PAGE:
                return

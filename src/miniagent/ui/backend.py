"""What the inbox does to sessions, through the same calls as the command line.

A decision is ``store.update`` with :func:`miniagent.core.session.decide` (the lease is
checked, sub-agents get the decision relayed), as ``miniagent sessions approve`` does; the run
that follows is ``Agent.aresume`` (``sessions resume``), a new question ``Agent.arun`` with the
session's id (``run --continue``), cancelling :func:`miniagent.core.agent.cancel_session`
(``sessions cancel``). Runs started here are tasks of this server's event loop; their events
wake the pages that follow them (:class:`Signal`).

Every change a person asks for names the session's :func:`version` as the page showed it: a
page shown before the session moved on (a call decided elsewhere, a new step, another status)
changes nothing, and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from anyio import to_thread

from miniagent.core.errors import (
    MiniAgentError,
    SessionBusy,
    SessionNotFound,
    TurnRefused,
    UserError,
)
from miniagent.core.runtime import events as ev
from miniagent.core.session import FINAL, TURN_ENDED, AgentSession, decide, storable
from miniagent.core.store.base import CheckpointStore
from miniagent.core.store.listing import SessionQuery, SessionRevision, SessionSummary, stamp_of
from miniagent.core.types import RunResult

if TYPE_CHECKING:
    from miniagent.core.agent import Agent

log = logging.getLogger("miniagent")

KEPT_RUNS = 1000
"""How many finished runs this server remembers (their result or error, for their pages)."""


class Sessions(Protocol):
    """What the inbox's pages need of a driver: :class:`LocalSessions` (a store, runs in
    this process) or :class:`~miniagent.ui.on_temporal.TemporalInbox`."""

    @property
    def runs_here(self) -> bool:
        """Whether sessions go on in this server (resume, a next question)."""
        ...

    async def page(self, query: SessionQuery) -> list[SessionSummary]: ...

    async def load(self, session_id: str) -> AgentSession: ...

    async def revision(self, session_id: str) -> SessionRevision:
        """Where the session stands, as cheaply as the driver can tell (a store reads it
        without loading the session)."""
        ...

    def run_of(self, session_id: str) -> RunHere | None: ...

    def signal(self, session_id: str) -> Signal: ...

    async def decide(self, session_id: str, call_id: str | None, approved: bool,
                     reason: str | None, seen: str,
                     arguments: dict[str, Any] | None = None) -> Done:
        """``arguments``: an approval of ``call_id`` with them instead of the model's."""
        ...

    async def resume(self, session_id: str, seen: str) -> Done: ...

    async def ask(self, session_id: str, question: str, seen: str) -> Done: ...

    async def cancel(self, session_id: str, reason: str | None, seen: str) -> Done: ...

    async def fork(self, session_id: str, at_step: int) -> Done: ...

    async def aclose(self) -> None: ...


def _edited(session: AgentSession, call_id: str | None) -> bool:
    """Whether the call ``call_id`` was approved with a person's arguments."""
    return any(r.call.id == call_id and r.edited_arguments is not None
               for r in session.open_calls())


def parent_of(session: AgentSession) -> str | None:
    """The id of the session whose call runs this one (a sub-agent's session), if any."""
    from miniagent.core.tools.agent_tool import PARENT_KEY

    parent = session.metadata.get(PARENT_KEY)
    found = parent.get("session_id") if isinstance(parent, dict) else None
    return found if isinstance(found, str) else None


def version(session: AgentSession) -> str:
    """A short text that changes whenever the session moves: a status change, a new step, a
    call's state (a decision is a move of its call). Statuses, steps and moves are only ever
    appended, so an old version never comes back."""
    moves = sum(len(r.moves) for r in session.steps[-1].calls) if session.steps else 0
    text = f"{len(session.transitions)}.{len(session.steps)}.{moves}.{session.status}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def revision_of(session: AgentSession) -> SessionRevision:
    """Where a session read whole stands (for drivers that cannot tell more cheaply)."""
    return SessionRevision(session_id=session.id, status=session.status,
                           stamp=stamp_of(version(session), session.updated_at))


_T = TypeVar("_T")


async def off_loop(work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` in a worker thread: a store's read or write (a whole session's JSON, a
    busy SQLite file) never stalls the pages the event loop serves meanwhile."""
    return await to_thread.run_sync(work, *args)


class Refusal(UserError):
    """A person's request that changed nothing; the message says why, in words."""


class Signal:
    """Wakes the pages that follow a session when its run emits an event (from any thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def fire(self) -> None:
        """Thread-safe: the run's events are delivered by the event bus's thread."""
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> None:
        """Until the next event, or ``timeout`` seconds."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)


@dataclass
class RunHere:
    """A run of a session started by this server."""

    what: str
    task: asyncio.Task[RunResult | None] | None = None
    result: RunResult | None = None
    error: str | None = None
    events: int = 0

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


@dataclass
class Done:
    """What a person's request did, in words for the page."""

    message: str
    run: RunHere | None = None
    goto: str | None = None
    """The session to show next, when it is another one (a fork)."""


@dataclass
class LocalSessions:
    """Sessions in a checkpoint store, run (when they go on) by agents of this process.

    Args:
        store: The sessions' store (it must offer ``page``: SQLiteStore and InMemoryStore do).
        agent_for: The agent that runs a session when it goes on (None: this server decides
            and cancels, and says where to resume).
        shared_agent: ``agent_for`` always returns one agent that its owner closes; else each
            run's agent is closed when the run ends.
        trace: A subscriber given every event of the runs started here (a JSONL tracer).
    """

    store: CheckpointStore
    agent_for: Callable[[AgentSession], Agent] | None = None
    shared_agent: bool = False
    trace: Callable[[ev.Event], None] | None = None
    runs: OrderedDict[str, RunHere] = field(default_factory=OrderedDict)
    signals: dict[str, Signal] = field(default_factory=dict)

    @property
    def runs_here(self) -> bool:
        return self.agent_for is not None

    # -- reading --------------------------------------------------------------------------

    async def page(self, query: SessionQuery) -> list[SessionSummary]:
        return await off_loop(self._page, query)

    def _page(self, query: SessionQuery) -> list[SessionSummary]:
        page = getattr(self.store, "page", None)
        if page is None:  # a store of someone else's: filter its plain listing
            rows = self.store.list(100_000)
            chosen = sorted((r for r in rows if query.follows(r)),
                            key=lambda r: (r.updated_at, r.session_id),
                            reverse=not query.oldest_first)
            return chosen[:query.limit]
        rows_of: Callable[[SessionQuery], list[SessionSummary]] = page
        return rows_of(query)

    async def load(self, session_id: str) -> AgentSession:
        return await off_loop(self.store.load, session_id)

    async def revision(self, session_id: str) -> SessionRevision:
        """Read from the store's columns where it can (``revision``: SQLiteStore and
        InMemoryStore), else from the session loaded whole."""
        read: Callable[[str], SessionRevision] | None = getattr(self.store, "revision", None)
        if read is None:  # a store of someone else's
            return revision_of(await self.load(session_id))
        return await off_loop(read, session_id)

    def run_of(self, session_id: str) -> RunHere | None:
        return self.runs.get(session_id)

    def signal(self, session_id: str) -> Signal:
        """What wakes the pages following ``session_id``: its run's signal while a run of it
        started here is remembered, else one that never fires (those pages read the store
        every second). Only runs add signals, so any id asked for costs no memory."""
        signal = self.signals.get(session_id)
        return signal if signal is not None else Signal(asyncio.get_running_loop())

    # -- changing -------------------------------------------------------------------------

    async def decide(self, session_id: str, call_id: str | None, approved: bool,
                     reason: str | None, seen: str,
                     arguments: dict[str, Any] | None = None) -> Done:
        """Approve or deny one waiting call (``call_id``) or all; ``arguments`` approves the
        call with them instead of the model's. Once no call waits, the session is resumed here
        (when this server can run it).

        Raises:
            Refusal: the page was stale, nothing waits, the call was decided already, the
                edited arguments do not fit the tool's schema, or the session is busy.
        """
        self._not_running_here(session_id)
        reason = storable(reason.strip()) if reason and reason.strip() else None

        def change(session: AgentSession) -> None:
            check_version(session, seen)
            not_a_sub_run(session, "decide on")
            decide(session, call_id, approved, reason, at=time.time(), arguments=arguments)

        try:
            session = await off_loop(self.store.update, session_id, change)
        except Refusal:
            raise
        except SessionBusy as exc:
            raise Refusal(f"nothing was decided: the session is busy: {exc}") from None
        except MiniAgentError as exc:  # DecisionError (decided already), an unknown session
            raise Refusal(f"nothing was decided: {exc}") from None
        verb = "approved" if approved else "denied"
        which = f"call {call_id}" if call_id else "every waiting call"
        if approved and _edited(session, call_id):
            which += " with your arguments"
        said = f" (reason: {reason})" if reason else ""
        if any(r.state == "awaiting_approval" for r in session.open_calls()):
            left = ", ".join(p.call_id for p in session.pending_approvals())
            return Done(message=f"{verb.capitalize()} {which}{said}; still waiting for a "
                                f"decision: {left}. The session resumes once every call is "
                                "decided.")
        done = await self._go_on(session_id, "resume")
        return Done(message=f"{verb.capitalize()} {which}{said}. {done.message}", run=done.run)

    async def resume(self, session_id: str, seen: str) -> Done:
        self._not_running_here(session_id)
        session = await self.load(session_id)
        check_version(session, seen)
        not_a_sub_run(session, "resume")
        if session.status in FINAL:
            raise Refusal(f"session {session_id} has ended ({session.status}); there is "
                          "nothing to resume")
        if session.pending_approvals():
            raise Refusal(f"session {session_id} waits for decisions: approve or deny its "
                          "calls first")
        return await self._go_on(session_id, "resume")

    async def ask(self, session_id: str, question: str, seen: str) -> Done:
        """``question`` as the session's next turn (``miniagent run --continue``)."""
        self._not_running_here(session_id)
        question = storable(question.strip())
        if not question:
            raise Refusal("the question is empty")
        session = await self.load(session_id)
        check_version(session, seen)
        not_a_sub_run(session, "ask")
        if session.status not in TURN_ENDED or session.phase == "tools":
            raise Refusal(str(TurnRefused(session._why_no_turn())))
        return await self._go_on(session_id, "ask", question)

    async def cancel(self, session_id: str, reason: str | None, seen: str) -> Done:
        from miniagent.core.agent import cancel_session

        self._not_running_here(session_id)
        reason = storable(reason.strip()) if reason and reason.strip() else None

        def check(session: AgentSession) -> None:  # as saved, under the lease
            check_version(session, seen)
            not_a_sub_run(session, "cancel")
            if session.status in FINAL:
                raise Refusal(f"session {session_id} has ended ({session.status}); there is "
                              "nothing to cancel")

        try:
            await off_loop(lambda: cancel_session(
                self.store, session_id, reason or "cancelled in the inbox", check=check))
        except (Refusal, SessionNotFound):
            raise
        except MiniAgentError as exc:
            raise Refusal(f"not cancelled: {exc}") from None
        return Done(message=f"Cancelled session {session_id}.")

    async def fork(self, session_id: str, at_step: int) -> Done:
        """A new session of the first ``at_step`` steps (``miniagent sessions fork``); the
        session itself is only read, so a running one forks as last saved."""
        from miniagent.core.runtime.fork import fork_stored

        try:
            child = await off_loop(fork_stored, self.store, session_id, at_step)
        except SessionNotFound:
            raise
        except MiniAgentError as exc:
            raise Refusal(f"not forked: {exc}") from None
        return Done(message=forked_message(session_id, at_step, child.status), goto=child.id)

    def _not_running_here(self, session_id: str) -> None:
        run = self.runs.get(session_id)
        if run is not None and run.running:
            raise Refusal(f"session {session_id} is busy: this server is running it ({run.what})"
                          "; wait until it stops")

    async def _go_on(self, session_id: str, how: str, question: str | None = None) -> Done:
        """Run the session on in a task of this loop (``resume``, or ``ask`` a question)."""
        if self.agent_for is None:
            return Done(message="This server runs no sessions (it has no agent); resume it "
                                f"with: miniagent sessions resume {session_id}")
        try:
            agent = self.agent_for(await self.load(session_id))
        except MiniAgentError as exc:
            return Done(message=f"It cannot go on here: {exc}")
        run = RunHere(what="answering a new question" if how == "ask" else "resumed")
        signal = self.signals.setdefault(session_id, Signal(asyncio.get_running_loop()))

        def on_event(event: ev.Event) -> None:
            run.events += 1
            if self.trace is not None:
                self.trace(event)
            signal.fire()

        if how == "ask":
            work = agent.arun(question or "", session_id=session_id, on_event=on_event)
        else:
            work = agent.aresume(session_id, on_event=on_event)
        run.task = asyncio.create_task(self._run(run, agent, work, signal))
        self._remember(session_id, run)
        # the lease is taken before the run's first await: a busy session fails here
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if run.error is not None:
            raise Refusal(f"it did not go on: {run.error}")
        return Done(message=f"The session {run.what} in this server.", run=run)

    async def _run(self, run: RunHere, agent: Agent, work: Any,
                   signal: Signal) -> RunResult | None:
        try:
            run.result = await work
            return run.result
        except Exception as exc:  # SessionBusy, a config error: shown on the session's page
            run.error = (str(exc) if isinstance(exc, MiniAgentError)
                         else f"{type(exc).__name__}: {exc}")
            log.warning("a run started in the inbox failed: %s", run.error)
            return None
        finally:
            if not self.shared_agent:
                with contextlib.suppress(Exception):
                    await agent.aclose()
            signal.fire()

    def _remember(self, session_id: str, run: RunHere) -> None:
        self.runs.pop(session_id, None)
        self.runs[session_id] = run
        while len(self.runs) > KEPT_RUNS:
            oldest = next(iter(self.runs))
            if self.runs[oldest].running:
                break
            del self.runs[oldest]
            self.signals.pop(oldest, None)

    async def aclose(self) -> None:
        """Wait for the runs started here to stop (cancelled: their last checkpoint stays)."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and r.running]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def forked_message(session_id: str, at_step: int, status: str) -> str:
    """What the page of a new fork says first."""
    return (f"Forked session {session_id} at step {at_step}: this is the new session "
            f"({status}).")


def not_a_sub_run(session: AgentSession, verb: str) -> None:
    """A sub-agent's session goes on through its parent's call (which relays decisions and
    resumes it with the sub-agent): refuse acting on it alone."""
    parent = parent_of(session)
    if parent is not None:
        raise Refusal(f"session {session.id} is a sub-agent's run: {verb} its parent session "
                      f"{parent} instead, which relays to it")


def check_version(session: AgentSession, seen: str) -> None:
    if seen != version(session):
        raise Refusal(f"session {session.id} changed since the page was shown (it is now "
                      f"{session.status}: {session.reason or 'no reason recorded'}); nothing "
                      "was changed: look at it again and decide anew")

"""The inbox's sessions on a Temporal cluster, through
:class:`~miniagent.temporal.TemporalSessions`.

The same pages as for a store: a session is read with the workflow's query, a decision is the
workflow's update (as ``miniagent sessions approve --temporal`` sends it; the workflow checks
it, relays it to sub-agents and goes on at once in its workers), cancelling is Temporal's
cancellation. The page's version is checked against the session as the query returns it just
before the update; the workflow itself refuses a call decided meanwhile. Pages follow a session
by querying it every second. The listing reads the newest ``WINDOW`` sessions of the cluster's
visibility store and filters them here (Temporal lists by start time; steps and tokens are not
in its listing, and show as unknown).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError

from miniagent.core.errors import MiniAgentError, SessionError, SessionNotFound
from miniagent.core.session import AgentSession
from miniagent.core.store.listing import SessionQuery, SessionRevision, SessionSummary
from miniagent.ui.backend import (
    Done,
    Refusal,
    RunHere,
    Signal,
    check_version,
    forked_message,
    not_a_sub_run,
    revision_of,
)

if TYPE_CHECKING:
    from miniagent.temporal import TemporalSessions

WINDOW = 500
"""How many of the newest sessions a listing reads from Temporal."""

UNKNOWN = -1
"""The steps of a listed session that Temporal's listing does not say."""


@dataclass
class TemporalInbox:
    """Sessions on a Temporal cluster, for the inbox.

    Args:
        address: The frontend's ``HOST:PORT``; connected on first use, in the server's loop.
        task_queue: The task queue the workers serve.
        sessions: A connected :class:`TemporalSessions` instead of ``address``.
    """

    address: str | None = None
    task_queue: str = "miniagent"
    sessions: TemporalSessions | None = None
    _lock: asyncio.Lock | None = None

    async def _remote(self) -> TemporalSessions:
        if self.sessions is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self.sessions is None:
                    from miniagent.temporal import TemporalSessions, connect

                    assert self.address is not None
                    self.sessions = TemporalSessions(await connect(self.address),
                                                     self.task_queue)
        return self.sessions

    @property
    def runs_here(self) -> bool:
        return False  # the cluster's workers run the sessions

    @property
    def where(self) -> str:
        return f"sessions on Temporal {self.address or ''}".rstrip()

    async def page(self, query: SessionQuery) -> list[SessionSummary]:
        try:
            rows: list[dict[str, Any]] = await (await self._remote()).list(WINDOW)
        except RPCError as exc:  # the cluster went away, or refused the listing
            raise SessionError(f"cannot list the sessions on Temporal: {exc}") from None
        summaries = [SessionSummary(session_id=r["session_id"], status=r["status"],
                                    steps=UNKNOWN, question=r["question"],
                                    created_at=r["started_at"], updated_at=r["started_at"])
                     for r in rows]
        chosen = sorted((s for s in summaries if query.follows(s)),
                        key=lambda s: (s.updated_at, s.session_id),
                        reverse=not query.oldest_first)
        return chosen[:query.limit]

    async def load(self, session_id: str) -> AgentSession:
        return await (await self._remote()).session(session_id)

    async def revision(self, session_id: str) -> SessionRevision:
        """The workflow's query is the only way to tell: the session read whole."""
        return revision_of(await self.load(session_id))

    def run_of(self, session_id: str) -> RunHere | None:
        return None  # sessions run in the cluster's workers, never here

    def signal(self, session_id: str) -> Signal:
        return Signal(asyncio.get_running_loop())  # never fired: pages query every second

    async def decide(self, session_id: str, call_id: str | None, approved: bool,
                     reason: str | None, seen: str,
                     arguments: dict[str, Any] | None = None) -> Done:
        """As in process; the workflow checks edited ``arguments`` (its update refuses them
        when they do not fit)."""
        session = await self.load(session_id)
        check_version(session, seen)
        not_a_sub_run(session, "decide on")
        reason = reason.strip() if reason and reason.strip() else None
        # "all" means the calls the page showed, decided by id: a call that began to wait
        # after the version check is not decided unseen
        ids = [call_id] if call_id else [p.call_id for p in session.pending_approvals()]
        if not ids:
            raise Refusal(f"nothing was decided: session {session_id} waits for no decision")
        if arguments is not None and len(ids) != 1:
            raise Refusal("nothing was decided: edited arguments are for one call")
        decided: list[str] = []
        remote = await self._remote()
        try:
            for one in ids:
                decided += await remote.decide(session_id, approved, one, reason,
                                               arguments=arguments)
        except (MiniAgentError, RPCError) as exc:
            before = f" (decided before that: {', '.join(decided)})" if decided else ""
            raise Refusal(f"nothing {'more ' if decided else ''}was decided: {exc}"
                          f"{before}") from None
        verb = "Approved" if approved else "Denied"
        said = f" (reason: {reason})" if reason else ""
        return Done(message=f"{verb} {', '.join(decided)}{said}; the session goes on in the "
                            "cluster's workers once every call is decided.")

    async def resume(self, session_id: str, seen: str) -> Done:
        raise Refusal("on Temporal a session goes on by itself in the cluster's workers; "
                      "there is nothing to resume here")

    async def ask(self, session_id: str, question: str, seen: str) -> Done:
        raise Refusal("on Temporal, ask the next question with: miniagent run --temporal "
                      f"HOST:PORT --continue {session_id} QUESTION")

    async def cancel(self, session_id: str, reason: str | None, seen: str) -> Done:
        session = await self.load(session_id)
        check_version(session, seen)
        not_a_sub_run(session, "cancel")
        try:
            how = await (await self._remote()).cancel(
                session_id, reason.strip() if reason and reason.strip() else
                "cancelled in the inbox")
        except (MiniAgentError, RPCError) as exc:
            raise Refusal(f"not cancelled: {exc}") from None
        return Done(message=f"Session {session_id}: {how}.")

    async def fork(self, session_id: str, at_step: int) -> Done:
        """The fork as a workflow of its own, started at once with its parent's spec."""
        try:
            child = await (await self._remote()).fork(session_id, at_step)
        except SessionNotFound:
            raise
        except (MiniAgentError, RPCError) as exc:
            raise Refusal(f"not forked: {exc}") from None
        return Done(message=forked_message(session_id, at_step, child.status), goto=child.id)

    async def aclose(self) -> None:
        return None

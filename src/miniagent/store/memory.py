"""MemoryStore: sessions kept in this process (the default when no store is given).

It keeps the session objects themselves, so checkpoints cost nothing; approvals, denials and
resume work within the process. Use :class:`~miniagent.store.sqlite.SQLiteStore` for sessions
that must outlive the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from miniagent.errors import SessionBusy, SessionNotFound
from miniagent.session import FINAL, AgentSession
from miniagent.store.base import SessionSummary
from miniagent.types import CallRecord


class MemoryStore:
    """A dict of sessions, with the same locking semantics as :class:`SQLiteStore`.

    Args:
        keep_finished: how many finished sessions (completed, cancelled, ...) to keep for
            inspection; older ones are dropped so a long-lived process does not grow without
            bound. Resumable sessions are always kept.
    """

    def __init__(self, keep_finished: int = 1000) -> None:
        self.keep_finished = keep_finished
        self._sessions: dict[str, AgentSession] = {}
        self._leases: dict[str, str] = {}
        self._lock = threading.Lock()

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        with self._lock:
            if owner is not None:
                self._check_lease(session.id, owner)
            self._sessions[session.id] = session
            if len(self._sessions) > 2 * self.keep_finished:
                self._drop_oldest_finished()

    def _drop_oldest_finished(self) -> None:
        finished = [s for s in self._sessions.values()
                    if s.status in FINAL and s.id not in self._leases]
        finished.sort(key=lambda s: s.updated_at)
        for old in finished[: max(0, len(finished) - self.keep_finished)]:
            del self._sessions[old.id]

    def save_call(self, session: AgentSession, record: CallRecord, *,
                  owner: str | None = None) -> None:
        """The session object is kept itself: saving one call is saving it (O(1))."""
        self.save(session, owner=owner)

    def load(self, session_id: str) -> AgentSession:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id!r} in this process's memory store")
        return session

    def list(self, limit: int = 50) -> list[SessionSummary]:
        with self._lock:
            sessions = sorted(self._sessions.values(), key=lambda s: s.updated_at, reverse=True)
        return [
            SessionSummary(session_id=s.id, status=s.status, steps=len(s.steps),
                           question=s.question, created_at=s.created_at,
                           updated_at=s.updated_at)
            for s in sessions[:limit]
        ]

    def update(self, session_id: str, change: Callable[[AgentSession], None], *,
               owner: str | None = None) -> AgentSession:
        session = self.load(session_id)
        with self._lock:
            self._check_lease(session_id, owner)
            change(session)
            session.updated_at = time.time()
        return session

    def _check_lease(self, session_id: str, owner: str | None) -> None:
        holder = self._leases.get(session_id)
        if holder is not None and holder != owner:
            raise SessionBusy(f"session {session_id} is being run by another task ({holder})")

    def acquire(self, session_id: str, owner: str) -> None:
        self.load(session_id)
        with self._lock:
            self._check_lease(session_id, owner)
            self._leases[session_id] = owner

    def release(self, session_id: str, owner: str) -> None:
        with self._lock:
            if self._leases.get(session_id) == owner:
                del self._leases[session_id]

"""MemoryStore: sessions kept in this process (the default when no store is given).

It keeps the session objects themselves, so checkpoints cost nothing; approvals, denials and
resume work within the process. Use :class:`~miniagent.store.sqlite.SQLiteStore` for sessions
that must outlive the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from miniagent.errors import SessionBusy, SessionNotFound
from miniagent.runtime.session import AgentSession
from miniagent.store.base import SessionSummary


class MemoryStore:
    """A dict of sessions, with the same locking semantics as :class:`SQLiteStore`."""

    def __init__(self) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._leases: dict[str, str] = {}
        self._lock = threading.Lock()

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        with self._lock:
            if owner is not None:
                self._check_lease(session.id, owner)
            self._sessions[session.id] = session

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

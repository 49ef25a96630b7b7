"""InMemoryStore: sessions kept in this process (the default when no store is given).

It keeps the session objects themselves, so checkpoints cost nothing; approvals, denials and
resume work within the process. Use :class:`~miniagent.core.store.sqlite.SQLiteStore` for sessions
that must outlive the process.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from miniagent._internal.text import storable
from miniagent.core.errors import SessionBusy, SessionNotFound
from miniagent.core.session import FINAL, AgentSession
from miniagent.core.store.base import SHOWN_MATCHES, resolve_id
from miniagent.core.types import CallRecord

if TYPE_CHECKING:  # a listing's types load with the first listing
    from miniagent.core.store.listing import SessionQuery, SessionRevision, SessionSummary

_Summaries = list["SessionSummary"]  # (the class's own ``list`` hides the builtin)

class InMemoryStore:
    """A dict of sessions, with the same locking semantics as :class:`SQLiteStore`.

    Finished sessions (completed, cancelled, ...) that no task holds a lease on queue up in
    the order they were last saved or released; once more than ``keep_finished`` of them are
    queued, the oldest are dropped, so a long-lived process does not grow without bound. A
    finished session saved again moves to the back of the queue. Resumable sessions (any
    status not in ``FINAL``) and sessions holding a lease are never dropped. Every method
    but :meth:`list` takes O(1) time.

    The store learns a session's status when it is saved, updated or released; a session
    object changed in place (it is the same object :meth:`load` returns) without one of those
    keeps its place.

    Args:
        keep_finished: How many finished sessions without a lease to keep for inspection.
    """

    def __init__(self, keep_finished: int = 1000) -> None:
        self.keep_finished = keep_finished
        self._sessions: dict[str, AgentSession] = {}
        self._leases: dict[str, str] = {}
        self._revoked: set[str] = set()  # owners whose lease a forced decision took
        # ids of finished, unleased sessions, oldest first: the only ones that may be dropped
        self._droppable: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        sid = session.id
        with self._lock:
            holder = self._leases.get(sid)
            if owner is not None:
                if holder is not None and holder != owner:
                    raise _busy(sid, holder)
                if owner in self._revoked:
                    raise SessionBusy(f"session {sid} was taken over by a forced "
                                      "decision; this run's changes are not saved")
            self._sessions[sid] = session
            # A leased session is never in the drop queue (acquire takes it out, _enqueue
            # never puts it in), so there is nothing to move: the common save, mid-run.
            if holder is None:
                self._enqueue(session)

    def _enqueue(self, session: AgentSession) -> None:
        """Put ``session`` at the back of the drop queue if it may be dropped, else take it
        out; then drop from the front down to ``keep_finished``. Holds ``_lock``."""
        sid = session.id
        self._droppable.pop(sid, None)
        if session.status in FINAL and sid not in self._leases:
            self._droppable[sid] = None
            while len(self._droppable) > self.keep_finished:
                oldest, _ = self._droppable.popitem(last=False)
                del self._sessions[oldest]

    def save_call(self, session: AgentSession, record: CallRecord, *,
                  owner: str | None = None) -> None:
        """The session object is kept itself: saving one call is saving it (O(1))."""
        self.save(session, owner=owner)

    def load(self, session_id: str) -> AgentSession:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise _not_found(session_id)
        return session

    def list(self, limit: int = 50) -> list[SessionSummary]:
        from miniagent.core.store.listing import SessionSummary  # loaded with a listing

        with self._lock:
            sessions = sorted(self._sessions.values(), key=lambda s: s.updated_at, reverse=True)
        return [
            SessionSummary(session_id=s.id, status=s.status, steps=len(s.steps),
                           question=s.question, created_at=s.created_at,
                           updated_at=s.updated_at)
            for s in sessions[:limit]
        ]

    def page(self, query: SessionQuery) -> _Summaries:
        """One page of the listing (see :class:`~miniagent.core.store.listing.SessionQuery`); O(n
        log
        n) in the sessions kept, which ``keep_finished`` bounds."""
        with self._lock:
            rows = [_summary(s) for s in self._sessions.values()]
        chosen = sorted((r for r in rows if query.follows(r)),
                        key=lambda r: (r.updated_at, r.session_id),
                        reverse=not query.oldest_first)
        return chosen[:query.limit]

    def revision(self, session_id: str) -> SessionRevision:
        """Where the session stands (see :class:`~miniagent.core.store.listing.SessionRevision`),
        read off the session object in O(calls of its last step).

        Raises:
            SessionNotFound: No such session.
        """
        from miniagent.core.store.listing import SessionRevision, stamp_of

        session = self.load(session_id)
        last = session.steps[-1].calls if session.steps else []
        stamp = stamp_of(id(session), session.updated_at, session.status, len(session.steps),
                         len(session.transitions), sum(len(r.moves) for r in last))
        return SessionRevision(session_id=session_id, status=session.status, stamp=stamp)

    def resolve(self, text: str) -> str:
        """The id of the one session ``text`` names: its id or a unique prefix of it (see
        :func:`~miniagent.core.store.base.resolve_id`); O(n) in the sessions kept."""
        prefix = storable(text)
        with self._lock:
            found = sorted(sid for sid in self._sessions if sid.startswith(prefix))
        return resolve_id(text, found[:SHOWN_MATCHES + 1], "this process's memory store")

    def update(self, session_id: str, change: Callable[[AgentSession], None], *,
               owner: str | None = None, force: bool = False) -> AgentSession:
        """Apply ``change``; with ``force``, even while another task holds the lease, which is
        then dropped (that task's next save is refused)."""
        session = self.load(session_id)
        with self._lock:
            if not force:
                self._check_lease(session_id, owner)
            elif self._leases.get(session_id) not in (None, owner):
                self._revoked.add(self._leases.pop(session_id))
            change(session)
            session.updated_at = time.time()
            if self._sessions.get(session_id) is session:  # not dropped meanwhile
                self._enqueue(session)
        return session

    def _check_lease(self, session_id: str, owner: str | None) -> None:
        holder = self._leases.get(session_id)
        if holder is not None and holder != owner:
            raise _busy(session_id, holder)

    def acquire(self, session_id: str, owner: str, *, force: bool = False) -> None:
        with self._lock:
            if session_id not in self._sessions:
                raise _not_found(session_id)
            if not force:
                self._check_lease(session_id, owner)
            self._leases[session_id] = owner
            self._droppable.pop(session_id, None)

    def release(self, session_id: str, owner: str) -> None:
        with self._lock:
            if self._leases.get(session_id) == owner:
                del self._leases[session_id]
                session = self._sessions.get(session_id)
                if session is not None:
                    self._enqueue(session)


def _summary(session: AgentSession) -> SessionSummary:
    from miniagent.core.store.listing import SessionSummary  # loaded with a listing

    return SessionSummary(session_id=session.id, status=session.status,
                          steps=len(session.steps), question=session.question,
                          created_at=session.created_at, updated_at=session.updated_at,
                          tokens=session.usage.counted_tokens)


def _busy(session_id: str, holder: str) -> SessionBusy:
    return SessionBusy(f"session {session_id} is being run by another task ({holder})")


def _not_found(session_id: str) -> SessionNotFound:
    return SessionNotFound(f"no session {session_id!r} in this process's memory store")

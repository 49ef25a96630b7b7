"""The checkpoint store interface, the lease that keeps one session in one process, and
:class:`InMemoryStore`, the store an agent gets when it is given none.

A lease names its owner as ``host:pid:start:token``: the host, the process id, the process's
start time (clock ticks since boot, from ``/proc/<pid>/stat``; ``-`` where there is no
``/proc``) and a random token. The start time tells a live owner from another process that
got the same id later (a container's CLI is often PID 1 in every run). A lease also has an
expiry, which a live owner keeps pushing forward (see :class:`~miniagent.core.store.SQLiteStore`).

:class:`InMemoryStore` keeps sessions in this process: the session objects themselves, so
checkpoints cost nothing; approvals, denials and resume work within the process. It sits beside
the interface as its reference: the same leases, updates and id prefixes in ~150 lines. Use
:class:`~miniagent.core.store.sqlite.SQLiteStore` for sessions that must outlive the process.

Sessions, calls and spans are stored under ids of 16 hex digits drawn from :data:`random_id`
(drivers draw every id the step logic needs: the in-process driver from here, a Temporal
workflow from ``workflow.uuid4()``, so that replaying recorded effects gives the same ids).
"""

from __future__ import annotations

import functools
import logging
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from miniagent.core.errors import SessionBusy, SessionNotFound, UserError
from miniagent.core.session import FINAL, AgentSession, storable
from miniagent.core.types import CallRecord

if TYPE_CHECKING:  # a listing's types load with the first listing
    from miniagent.core.store.listing import SessionQuery, SessionRevision, SessionSummary

log = logging.getLogger("miniagent")

LEASE_SECONDS = 600.0
"""How long a lease stays valid unless its owner renews it (a live owner renews it well before)."""


MIN_PREFIX = 4
"""A session id may be given by its first characters, at least this many (git's minimum)."""

SHOWN_MATCHES = 10
"""An ambiguous prefix is refused with at most this many of the ids it begins."""


def resolve_id(text: str, found: list[str], where: str) -> str:
    """The one session ``text`` names: its whole id, or a unique prefix of it (as git takes
    a commit's). Every ``sessions`` command names its session through this.

    Args:
        text: What the person typed.
        found: The ids that begin with ``text``, in sorted order (so an id equal to ``text``
            comes first), at most ``SHOWN_MATCHES + 1`` of them.
        where: The store or cluster, for the messages.

    Raises:
        SessionNotFound: No session has that id, or (long enough) begins with it.
        UserError: The prefix is shorter than ``MIN_PREFIX``, or begins several ids.
    """
    if found and found[0] == storable(text):
        return found[0]  # a whole id wins, even where it begins longer ones
    if not found:
        raise SessionNotFound(f"no session {storable(text)!r} in {where}")
    if len(text) < MIN_PREFIX:
        raise UserError(f"no session {storable(text)!r} in {where}; a prefix of a session id "
                        f"needs at least {MIN_PREFIX} characters")
    if len(found) > 1:
        shown = ", ".join(found[:SHOWN_MATCHES]) + (", ..." if len(found) > SHOWN_MATCHES
                                                      else "")
        many = f"more than {SHOWN_MATCHES}" if len(found) > SHOWN_MATCHES else len(found)
        raise UserError(f"session id {storable(text)!r} is ambiguous: {many} sessions in "
                        f"{where} begin with it ({shown}); give more characters")
    return found[0]


class CheckpointStore(Protocol):
    """Saves and loads sessions; every method is atomic.

    ``force=True`` on ``acquire`` and ``update`` is a person's override of a lease that looks
    held, for when they know its owner is gone; the overridden owner's next save is refused.
    """

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        """Insert or replace ``session``; with ``owner``, check and refresh that owner's lease."""
        ...

    def save_call(self, session: AgentSession, record: CallRecord, *,
                  owner: str | None = None) -> None:
        """Save one call of the session's last step (just completed), at a cost proportional
        to that call, not to the session; the next :meth:`save` takes it in."""
        ...

    def load(self, session_id: str) -> AgentSession:
        """Raises SessionNotFound, SessionVersionError or StoreCorrupted."""
        ...

    def list(self, limit: int = 50) -> list[SessionSummary]:
        """Most recently updated first."""
        ...

    def update(self, session_id: str, change: Callable[[AgentSession], None], *,
               owner: str | None = None, force: bool = False) -> AgentSession:
        """Load, apply ``change``, save, in one transaction (approvals from another process).

        Raises SessionBusy while a live process other than ``owner`` holds the lease.
        """
        ...

    def acquire(self, session_id: str, owner: str, *, force: bool = False) -> None:
        """Take the session's lease; raises SessionBusy while a live process holds it."""
        ...

    def release(self, session_id: str, owner: str) -> None:
        """Give the lease back (only if ``owner`` holds it)."""
        ...


def new_owner() -> str:
    """A lease owner id: host, process id, the process's start time and a random token."""
    return f"{_this_process()}:{os.urandom(4).hex()}"


@functools.lru_cache(maxsize=4)
def _process_identity(pid: int) -> str:
    import socket  # here: a store's first lease loads it, not the import of the Agent class

    return f"{socket.gethostname()}:{pid}:{process_start(pid) or '-'}"


def _this_process() -> str:
    """``host:pid:start`` of this process, read once per process id (a fork gets its own)."""
    return _process_identity(os.getpid())


def held_here(owner: str | None) -> bool:
    """Whether the lease ``owner`` is this process (another run of it, or a tool call of a
    stopped run still under way)."""
    return bool(owner) and str(owner).startswith(f"{_this_process()}:")


def lease_alive(owner: str | None, until: float | None) -> bool:
    """True while the lease's owner may still be running the session.

    A lease is free once its expiry has passed (a live owner renews it). Before that, on this
    host, it is free as soon as its process is gone: the process id is not running, or is
    running a process that started at another time than the owner did (the id was reused).
    For another host, only the expiry can tell.
    """
    if not owner or until is None or until <= time.time():
        return False
    import socket

    parts = owner.split(":")
    host, pid_text = parts[0], parts[1] if len(parts) > 1 else ""
    start = parts[2] if len(parts) == 4 else ""  # older owners: host:pid:token
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == 0:
        return True
    pid = int(pid_text)
    if not _pid_alive(pid):
        return False
    now_start = process_start(pid) if start.isdigit() else None
    return now_start is None or now_start == start


def interrupted_run(status: str, owner: str | None, until: float | None) -> bool:
    """Whether a session saved as ``running`` has no live process running it: its lease
    (``owner``, valid ``until``) is gone, expired or held by a dead process (see
    :func:`lease_alive`)."""
    return status == "running" and not lease_alive(owner, until)


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux ``/proc``), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except OSError:
        return None
    # field 2 (the command name) is in parentheses and may hold spaces and ')'
    fields = text.rpartition(")")[2].split()
    start = fields[19] if len(fields) > 19 else ""  # field 22 of the whole line
    return start if start.isdigit() else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LeaseRenewer:
    """Keeps the leases a store holds from expiring while their runs go on.

    A run renews its lease at every checkpoint, but a long tool call, a slow model or a person
    at the approval prompt can keep it from checkpointing for longer than the lease lasts. One
    daemon thread per store renews what it holds every ``every()`` seconds; it stops when the
    store holds nothing. If the process dies, renewing stops with it and the lease expires.

    Args:
        renew: Renews the given (session id, owner) leases; returns the ones no longer held.
        every: Seconds between renewals (read at each wait).
    """

    def __init__(self, renew: Callable[[list[tuple[str, str]]], list[tuple[str, str]]],
                 every: Callable[[], float]) -> None:
        self._renew, self._every = renew, every
        self._held: dict[str, str] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def hold(self, session_id: str, owner: str) -> None:
        with self._wake:
            self._held[session_id] = owner
            if self._thread is None or not self._thread.is_alive():  # none yet, or forked
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="miniagent-lease-renewer")
                self._thread.start()

    def drop(self, session_id: str, owner: str) -> None:
        with self._wake:
            if self._held.get(session_id) == owner:
                del self._held[session_id]
            self._wake.notify_all()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _idle(self) -> bool:
        return self._closed or not self._held

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(self._idle, timeout=self._every())
                if self._idle():
                    self._thread = None
                    return
                held = list(self._held.items())
            try:
                lost = self._renew(held)
            except Exception as exc:  # a busy or damaged store: the next checkpoint reports it
                log.warning("could not renew session leases (%s: %s)", type(exc).__name__, exc)
                continue
            with self._wake:
                for session_id, owner in lost:
                    if self._held.get(session_id) == owner:
                        del self._held[session_id]


# -- InMemoryStore ---------------------------------------------------------------------------------

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


def __getattr__(name: str) -> Any:
    # the listing's types load with a listing (the CLI's, the UI's), not with ``import miniagent``
    if name in ("SessionQuery", "SessionSummary"):
        from miniagent.core.store import listing

        return getattr(listing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- new ids ---------------------------------------------------------------------------------------

class _Ids:
    """64 random bits per id from a generator seeded by the OS once per process (reading the
    OS's source for each of the ~13 ids of a run cost 4 µs each); a fork reseeds."""

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self._random = random.Random(os.urandom(32))

    def __call__(self) -> str:
        return f"{self._random.getrandbits(64):016x}"


random_id = _Ids()
"""A new id: 16 hex digits, unique (not secret: ids are not credentials)."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=random_id.reseed)

"""The checkpoint store interface, and the lease that keeps one session in one process.

A lease names its owner as ``host:pid:start:token``: the host, the process id, the process's
start time (clock ticks since boot, from ``/proc/<pid>/stat``; ``-`` where there is no
``/proc``) and a random token. The start time tells a live owner from another process that
got the same id later (a container's CLI is often PID 1 in every run). A lease also has an
expiry, which a live owner keeps pushing forward (see :class:`~miniagent.core.store.SQLiteStore`).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from miniagent._internal.text import storable
from miniagent.core.errors import SessionNotFound, UserError
from miniagent.core.session import AgentSession
from miniagent.core.types import CallRecord

if TYPE_CHECKING:
    from miniagent.core.store.listing import SessionSummary

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


def __getattr__(name: str) -> Any:
    # the listing's types load with a listing (the CLI's, the UI's), not with ``import miniagent``
    if name in ("SessionQuery", "SessionSummary"):
        from miniagent.core.store import listing

        return getattr(listing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

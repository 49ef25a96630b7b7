"""The checkpoint store interface, and the lease that keeps one session in one process."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from miniagent.session import AgentSession

LEASE_SECONDS = 600.0
"""How long a lease held by a process on another host stays valid without a checkpoint."""


@dataclass(kw_only=True)
class SessionSummary:
    """One line of a session listing (read without loading the whole session)."""

    session_id: str
    status: str
    steps: int
    question: str
    created_at: float
    updated_at: float


class CheckpointStore(Protocol):
    """Saves and loads sessions; every method is atomic."""

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        """Insert or replace ``session``; with ``owner``, check and refresh that owner's lease."""
        ...

    def load(self, session_id: str) -> AgentSession:
        """Raises SessionNotFound, SessionVersionError or StoreCorrupted."""
        ...

    def list(self, limit: int = 50) -> list[SessionSummary]:
        """Most recently updated first."""
        ...

    def update(self, session_id: str, change: Callable[[AgentSession], None], *,
               owner: str | None = None) -> AgentSession:
        """Load, apply ``change``, save, in one transaction (approvals from another process).

        Raises SessionBusy while a live process other than ``owner`` holds the lease.
        """
        ...

    def acquire(self, session_id: str, owner: str) -> None:
        """Take the session's lease; raises SessionBusy while a live process holds it."""
        ...

    def release(self, session_id: str, owner: str) -> None:
        """Give the lease back (only if ``owner`` holds it)."""
        ...


def new_owner() -> str:
    """A lease owner id: host, process id and a random token."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_alive(owner: str | None, until: float | None) -> bool:
    """True while the lease's owner may still be running the session.

    On this host, the owner's process id decides (a SIGKILLed process frees its sessions at
    once); for another host, the lease's expiry time does.
    """
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host == socket.gethostname() and pid_text.isdigit():
        return _pid_alive(int(pid_text))
    return until is not None and until > time.time()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

"""A store another process holds locked: a busy error to try again, never "damaged".

Another connection to the same file takes the write lock (as a long migration or a long write
of another process does) and the store under test waits a short while for it (its
``BUSY_SECONDS``); what it reports then is SessionBusy, and nothing saved is lost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from miniagent.core.errors import SessionBusy
from miniagent.core.session import AgentSession
from miniagent.core.store import SQLiteStore


class QuickStore(SQLiteStore):
    """Waits a tenth of a second for another process's lock, not ten."""

    BUSY_SECONDS = 0.1


@contextmanager
def locked(path: Path, how: str) -> Iterator[None]:
    """``path`` held by another connection inside ``BEGIN <how>`` (the write lock)."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute(f"BEGIN {how}")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


@pytest.mark.parametrize("how", ["IMMEDIATE", "EXCLUSIVE"])
def test_a_checkpoint_while_another_process_holds_the_lock_is_busy(tmp_path: Path,
                                                                    how: str) -> None:
    path = tmp_path / "s.db"
    store = QuickStore(path)
    session = AgentSession.start("q", id="a", at=1.0)
    store.save(session)
    session.finish("completed", "done", "42", at=2.0)
    with locked(path, how), pytest.raises(SessionBusy, match=r"busy.*try again"):
        store.save(session)
    store.save(session)  # the lock is gone: the same checkpoint goes through
    assert store.load("a").final_answer == "42"


def test_opening_a_store_another_process_holds_locked_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    sqlite3.connect(path).close()  # an empty file: opening it writes the schema
    with locked(path, "EXCLUSIVE"), pytest.raises(SessionBusy, match=r"busy.*try again"):
        QuickStore(path)
    assert QuickStore(path).list() == []

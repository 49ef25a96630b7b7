"""Decisions from other processes while a run waits at its approval prompt (SQLite store).

A run that asks a person inline (``miniagent chat``, ``miniagent run`` in a terminal) holds its
session's lease while it waits; ``sessions approve`` from another shell would be refused as
"being run by another process". So the waiting run opens a door: a row naming the lease owner.
While it is open, :meth:`~miniagent.core.store.sqlite.SQLiteStore.update` without an owner (a
decision) goes through for that owner's session and counts itself in the row; the run polls the
count, and closes the door before it goes on, in the transaction that tells it what arrived. A
door counts only while its owner holds a live lease: a row left by a process that died is inert
(a decision then goes through as for a session nobody holds), and a new lease drops it.

The functions take the store's connection inside its transaction (or its read lock).
"""

from __future__ import annotations

import sqlite3

from miniagent.core.session import storable
from miniagent.core.store.base import lease_alive

__all__ = ["SCHEMA", "arrived", "close", "knock", "open_door", "open_for_holder"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS decision_doors (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    arrived INTEGER NOT NULL DEFAULT 0
)
"""


def open_door(db: sqlite3.Connection, session_id: str, owner: str) -> None:
    """Let decisions in for ``owner``'s session, none counted yet."""
    db.execute("INSERT OR REPLACE INTO decision_doors (session_id, owner, arrived) "
               "VALUES (?, ?, 0)", (storable(session_id), storable(owner)))


def close(db: sqlite3.Connection, session_id: str) -> None:
    db.execute("DELETE FROM decision_doors WHERE session_id = ?", (storable(session_id),))


def arrived(db: sqlite3.Connection, session_id: str, owner: str) -> int:
    """How many decisions came through ``owner``'s door; 0 when it is not open."""
    try:
        row = db.execute("SELECT arrived FROM decision_doors WHERE session_id = ? AND owner = ?",
                         (storable(session_id), storable(owner))).fetchone()
    except sqlite3.OperationalError:  # a store made before the table, opened read-only
        return 0
    return int(row[0]) if row else 0


def open_for_holder(db: sqlite3.Connection, session_id: str) -> bool:
    """Whether the session's lease holder has its door open (it waits for decisions) and is
    alive (a holder killed at its prompt leaves its row and its lease behind)."""
    try:
        row = db.execute("SELECT s.lease_owner, s.lease_until FROM decision_doors AS d "
                         "JOIN sessions AS s ON s.id = d.session_id AND s.lease_owner = d.owner "
                         "WHERE d.session_id = ?", (storable(session_id),)).fetchone()
    except sqlite3.OperationalError:
        return False
    return row is not None and lease_alive(row[0], row[1])


def knock(db: sqlite3.Connection, session_id: str) -> None:
    """Count one decision that came through."""
    db.execute("UPDATE decision_doors SET arrived = arrived + 1 WHERE session_id = ?",
               (storable(session_id),))

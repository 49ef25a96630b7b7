"""Where a saved session stands, read without its JSON (``revision``), and a store made before
the table that holds it: read as it is, given it when opened for writing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from miniagent import InMemoryStore, SQLiteStore
from miniagent.core.errors import SessionNotFound
from miniagent.core.session import AgentSession
from miniagent.core.store.listing import SessionQuery
from miniagent.core.types import CallRecord, Step, TokenUsage, ToolCall

OLD_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, status TEXT NOT NULL, question TEXT NOT NULL,
    steps INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    data TEXT NOT NULL, lease_owner TEXT, lease_until REAL)
"""


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_revision_moves_with_every_change_and_only_then(kind: str, tmp_path: Path) -> None:
    store = InMemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    session = AgentSession.start("q", id="a", at=1.0)
    session.steps.append(Step(index=1, calls=[CallRecord(call=ToolCall(id="c1", name="t"))]))
    store.save(session)
    seen = [store.revision("a")]
    store.load("a")
    assert store.revision("a") == seen[0]  # reading changes nothing
    record = session.steps[0].calls[0]
    record.move("started", "about to run", at=2.0)
    store.save_call(session, record)  # one call saved on its own
    seen.append(store.revision("a"))
    store.update("a", lambda s: s.transition("error", "stopped", at=3.0))
    seen.append(store.revision("a"))
    assert len({r.stamp for r in seen}) == 3
    assert [r.status for r in seen] == ["running", "running", "error"]
    with pytest.raises(SessionNotFound):
        store.revision("nobody")


def old_store(path: Path) -> None:
    """A store as miniagent wrote it before the revisions table."""
    session = AgentSession.start("old question", id="old", at=1.0)
    session.add_usage(TokenUsage(prompt_tokens=40, completion_tokens=2))
    db = sqlite3.connect(path)
    db.execute(OLD_SCHEMA)
    rows = [("old", json.dumps(session.to_dict())), ("broken", "{not json")]
    db.executemany("INSERT INTO sessions VALUES (?, 'completed', 'q', 0, 1.0, ?, ?, NULL, "
                   "NULL)", [(sid, n + 1.0, data) for n, (sid, data) in enumerate(rows)])
    db.commit()
    db.close()


def test_a_store_made_before_the_revisions_is_read_and_then_given_them(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    old_store(path)
    read_only = SQLiteStore(path, readonly=True)
    as_it_was = [(r.session_id, r.tokens) for r in read_only.page(SessionQuery())]
    stamp = read_only.revision("old").stamp
    read_only.close()
    store = SQLiteStore(path)  # opened for writing: the table is added, empty
    given = [(r.session_id, r.tokens) for r in store.page(SessionQuery())]
    store.update("old", lambda s: None)  # saved again: its revision moves
    assert as_it_was == given == [("broken", None), ("old", 42)]
    assert store.revision("old").stamp != stamp
    assert SQLiteStore(path).revision("broken").status == "completed"  # opened again: as is


def test_a_session_saved_without_a_revisions_row_lists_its_tokens(tmp_path: Path) -> None:
    """An older miniagent that writes to a store a newer one has opened adds no revisions row:
    its sessions' tokens are read from their JSON until they are saved again."""
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    session = AgentSession.start("older", id="older", at=1.0)
    session.add_usage(TokenUsage(prompt_tokens=30, completion_tokens=7))
    db = sqlite3.connect(path)
    db.execute("INSERT INTO sessions VALUES ('older', 'completed', 'older', 0, 1.0, 1.0, ?, "
               "NULL, NULL)", (json.dumps(session.to_dict()),))
    db.commit()
    db.close()
    store = SQLiteStore(path)
    assert [(r.session_id, r.tokens) for r in store.page(SessionQuery())] == [("older", 37)]

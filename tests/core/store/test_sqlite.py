"""SQLiteStore on real files: round trips, WAL, damage, leases, hostile text, modes, read-only."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from miniagent import Limits
from miniagent.core.errors import (
    DecisionError,
    SessionBusy,
    SessionNotFound,
    StoreCorrupted,
    UserError,
)
from miniagent.core.session import AgentSession, decide
from miniagent.core.store import SQLiteStore
from miniagent.core.store.base import new_owner, random_id
from miniagent.core.types import Message


def saved(store: SQLiteStore, question: str) -> AgentSession:
    session = AgentSession.start(question, id=random_id(), at=time.time())
    store.save(session)
    return session


def test_round_trip_list_and_wal(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = saved(store, "first 第一")
    second = saved(store, "second")
    second.finish("completed", "done", "42", at=time.time())
    store.save(second)
    assert store.load(first.id) == first
    assert store.load(second.id).final_answer == "42"
    rows = store.list()
    assert [r.session_id for r in rows] == [second.id, first.id]
    assert (rows[0].status, rows[1].question) == ("completed", "first 第一")
    mode = sqlite3.connect(tmp_path / "s.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    with pytest.raises(SessionNotFound):
        store.load("nope")


def test_default_path_comes_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINIAGENT_STORE", str(tmp_path / "env" / "x.db"))
    store = SQLiteStore()
    assert store.path == tmp_path / "env" / "x.db" and store.path.exists()


def test_update_is_atomic_and_keeps_a_failed_change_out(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = saved(store, "q")
    with pytest.raises(DecisionError, match="not awaiting approval"):
        store.update(session.id, lambda s: decide(s, None, True, None, at=time.time()))
    assert store.load(session.id) == session


def test_a_damaged_session_does_not_hide_the_others(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    good, bad = saved(store, "good"), saved(store, "bad")
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE sessions SET data = '{\"schema_version\": 1, \"steps\": 7' "
                   "WHERE id = ?", (bad.id,))
    with pytest.raises(StoreCorrupted, match=f"session {bad.id} is damaged"):
        store.load(bad.id)
    assert store.load(good.id) == good
    assert {r.session_id for r in store.list()} == {good.id, bad.id}


def test_a_truncated_store_file_is_a_clear_error_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    for i in range(30):
        saved(store, f"question {i} " + "x" * 2000)
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    damaged = path.read_bytes()
    with pytest.raises(StoreCorrupted, match="cannot be read") as info:
        reopened = SQLiteStore(path)
        reopened.list()
        for row in reopened.list():
            reopened.load(row.session_id)
    assert "left untouched" in str(info.value)
    assert path.read_bytes() == damaged


def test_garbage_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreCorrupted, match="cannot be read"):
        SQLiteStore(path)
    assert path.read_bytes() == b"this is not a database" * 100


def test_lease_one_owner_at_a_time(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = saved(store, "q")
    a, b = new_owner(), new_owner()
    store.acquire(session.id, a)
    store.acquire(session.id, a)  # re-entrant for the same owner
    with pytest.raises(SessionBusy, match="being run by this process"):
        SQLiteStore(tmp_path / "s.db").acquire(session.id, b)
    store.release(session.id, a)
    store.acquire(session.id, b)


def test_lease_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = saved(store, "q")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = new_owner().split(":")[0]
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE sessions SET lease_owner = ?, lease_until = 1e12 WHERE id = ?",
                   (f"{host}:{dead.pid}:feedbeef", session.id))
    store.acquire(session.id, new_owner())



def test_lone_surrogates_are_stored_as_replacement_characters(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = AgentSession.start("caf\udce9.txt?", id=random_id(), at=time.time())
    session.messages.append(Message(role="assistant", content="broken \ud800 escape"))
    session.messages.append(Message(role="user", content="a pair \ud83d\ude00 joined"))
    session.finish("completed", "done", "\udfff", at=time.time())
    store.save(session)
    loaded = SQLiteStore(tmp_path / "s.db").load(session.id)
    assert loaded.question == "caf\ufffd.txt?" and store.list()[0].question == "caf\ufffd.txt?"
    assert [m.content for m in loaded.messages][-2:] == ["broken \ufffd escape",
                                                          "a pair \U0001f600 joined"]
    assert loaded.final_answer == "\ufffd"
    with pytest.raises(SessionNotFound):
        store.load("\udcff")


def test_a_run_whose_answer_holds_a_lone_surrogate_is_saved(tmp_path: Path) -> None:
    from miniagent import Agent, ScriptedModel

    store = SQLiteStore(tmp_path / "s.db")
    result = Agent(model=ScriptedModel(["Final Answer: \ud800"]), store=store).run("q")
    assert result.status == "completed"
    saved_session = SQLiteStore(tmp_path / "s.db").load(result.session_id)
    assert (saved_session.status, saved_session.final_answer) == ("completed", "\ufffd")


def test_a_row_of_invalid_utf8_is_read_without_crashing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = saved(store, "q")
    with sqlite3.connect(tmp_path / "s.db") as db:  # another program wrote raw bytes
        db.execute("UPDATE sessions SET question = CAST(? AS TEXT), "
                   "data = CAST(replace(data, '\"q\"', ?) AS TEXT) WHERE id = ?",
                   (b"caf\xe9", b'"caf\xe9"', session.id))
    assert store.list()[0].question == "caf\ufffd"
    assert store.load(session.id).question == "caf\ufffd"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_store_its_folders_wal_and_shm_are_private(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)  # the usual one, which made them 0644 and 0755
    try:
        store = SQLiteStore(tmp_path / "new" / "deeper" / "s.db")
        saved(store, "a transcript")
        files = [tmp_path / "new" / "deeper" / name for name in ("s.db", "s.db-wal", "s.db-shm")]
        assert all(f.exists() for f in files)  # the store is open: WAL and SHM are there
        assert [_mode(f) for f in files] == [0o600, 0o600, 0o600]
        assert _mode(tmp_path / "new") == _mode(tmp_path / "new" / "deeper") == 0o700
        before = _mode(tmp_path)
        SQLiteStore(tmp_path / "beside.db")
        assert _mode(tmp_path) == before  # a folder miniagent did not create keeps its mode
        assert _mode(tmp_path / "beside.db") == 0o600
    finally:
        os.umask(old_umask)


def test_the_default_store_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINIAGENT_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    store = SQLiteStore()
    assert store.path == tmp_path / "share" / "miniagent" / "sessions.db"
    assert _mode(tmp_path / "share") == _mode(tmp_path / "share" / "miniagent") == 0o700
    assert _mode(store.path) == 0o600


def test_a_readonly_store_reads_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    writer = SQLiteStore(path)
    session = saved(writer, "q")
    writer.close()
    with sqlite3.connect(path) as db:  # a store that is not in WAL mode must stay so
        db.execute("PRAGMA journal_mode=DELETE")
    data = path.read_bytes()
    store = SQLiteStore(path, readonly=True)
    assert [r.session_id for r in store.list()] == [session.id]
    assert store.load(session.id) == session
    for write in (lambda: store.save(session), lambda: store.acquire(session.id, new_owner()),
                  lambda: store.update(session.id, lambda s: None),
                  lambda: store.release(session.id, "x")):
        with pytest.raises(UserError, match="opened read-only"):
            write()
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store._db.execute("DELETE FROM sessions")  # the connection itself is mode=ro
    store.close()
    assert path.read_bytes() == data
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_readonly_store_that_does_not_exist_is_empty_and_stays_missing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "s.db"
    store = SQLiteStore(path, readonly=True)
    assert store.list() == []
    with pytest.raises(SessionNotFound):
        store.load("abc")
    assert not path.parent.exists()


def test_a_completed_call_is_saved_alone_and_read_back_until_the_next_full_save(
        tmp_path: Path) -> None:
    from miniagent.core.types import CallRecord, Message, Observation, Step, ToolCall

    store = SQLiteStore(tmp_path / "s.db")
    session = AgentSession.start("q", id="s-calls", at=1.0)
    calls = [ToolCall(id=f"c{i}", name="t") for i in range(3)]
    session.messages.append(Message(role="assistant", content="", tool_calls=calls))
    records = [CallRecord(call=c) for c in calls]
    for record in records:
        record.move("started", "about to run", 2.0)
    session.steps.append(Step(index=1, calls=records))
    session.phase = "tools"
    store.save(session)
    row_before = sqlite3.connect(tmp_path / "s.db").execute(
        "SELECT data FROM sessions WHERE id = 's-calls'").fetchone()[0]
    records[1].observation = Observation(call_id="c1", tool_name="t", output="one 一")
    records[1].move("completed", "the tool returned", 3.0)
    store.save_call(session, records[1])
    # the session's row is not rewritten: the save cost follows the call
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("SELECT data FROM sessions WHERE id = 's-calls'").fetchone()[0] == row_before
    loaded = SQLiteStore(tmp_path / "s.db").load("s-calls")  # as another process sees it
    assert [r.state for r in loaded.steps[0].calls] == ["started", "completed", "started"]
    assert loaded.steps[0].calls[1].observation.output == "one 一"  # type: ignore[union-attr]
    store.save(session)  # the next full save takes the call in and clears its row
    assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 0
    assert SQLiteStore(tmp_path / "s.db").load("s-calls") == session


def test_a_thousand_calls_in_one_step_complete_on_sqlite(tmp_path: Path) -> None:
    import json

    from miniagent import Agent, ScriptedModel, tool

    @tool
    def ping(n: int) -> str:
        """Ping."""
        return f"pong {n}"

    calls = [{"id": f"c{i}", "type": "function",
              "function": {"name": "ping", "arguments": json.dumps({"n": i})}}
             for i in range(1000)]
    model = ScriptedModel([{"content": None, "tool_calls": calls}, {"content": "done"}],
                          tool_mode="native")
    store = SQLiteStore(tmp_path / "s.db")
    result = Agent(model=model, tools=[ping], store=store,
                   limits=Limits(max_calls_per_step=1000)).run("q")
    assert result.status == "completed"
    loaded = store.load(result.session_id)
    assert len(loaded.steps[0].observations) == 1000
    assert loaded.steps[0].observations[-1].output == "pong 999"

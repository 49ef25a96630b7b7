"""A long session in the inbox: its page shows its last steps and pages back through the
rest, a page that follows it is sent nothing until it changes and then only what changed, the
listing never reads a session's JSON, and a slow read stalls no other page."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from ui_support import LOCAL, hidden, long_waiting_session

from miniagent import SQLiteStore
from miniagent.core.session import AgentSession
from miniagent.core.types import TokenUsage
from miniagent.ui import app, server

BASE = "http://127.0.0.1:8765"
STEPS = 10_000
PAGE_BYTES = 200_000
"""A page of a session of any length stays under this (a 10,000-step page was 7.9 MB)."""


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A SQLite file holding one waiting session of 10,000 steps (built once; copied per test)."""
    path = tmp_path_factory.mktemp("long") / "s.db"
    store, sid = long_waiting_session(path, STEPS)
    store.close()
    return path, sid


def copy_of(long_store: tuple[Path, str], tmp_path: Path) -> tuple[SQLiteStore, str]:
    path, sid = long_store
    shutil.copy(path, tmp_path / "s.db")
    return SQLiteStore(tmp_path / "s.db"), sid


def client(inbox: object) -> TestClient:
    return TestClient(inbox, client=LOCAL, base_url=BASE, headers={"Origin": BASE})  # type: ignore[arg-type]


def shown_steps(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li data-step="(\d+)"><details class="step"', page)]


def corrupt(path: Path, sid: str) -> None:
    """Damage the session's JSON as a stray program would, touching no other column."""
    db = sqlite3.connect(path)
    db.execute("UPDATE sessions SET data = '{not json' WHERE id = ?", (sid,))
    db.commit()
    db.close()


def test_a_long_sessions_page_shows_its_last_steps_and_pages_back(
        long_store: tuple[Path, str], tmp_path: Path) -> None:
    store, sid = copy_of(long_store, tmp_path)
    with client(app(store=store)) as http:
        last = http.get(f"/sessions/{sid}")
        earlier = re.search(r'<a rel="prev" href="([^"]*)"', last.text)
        assert earlier is not None
        before = http.get(earlier.group(1).replace("&amp;", "&"))
        first = http.get(f"/sessions/{sid}", params={"before": "1"})
    assert last.status_code == 200 and len(last.content) < PAGE_BYTES
    assert shown_steps(last.text) == list(range(STEPS - 50, STEPS))
    assert "10,000 steps" in last.text and "Waiting for a decision" in last.text
    assert 'id="live"' in last.text  # the last steps are followed
    assert len(before.content) < PAGE_BYTES
    assert shown_steps(before.text) == list(range(STEPS - 100, STEPS - 50))
    assert "Steps 9,901–9,950 of 10,000." in before.text and 'rel="next"' in before.text
    assert 'id="live"' not in before.text  # a page of the history is not followed
    assert shown_steps(first.text) == list(range(50)) and "Steps 1–50 of" in first.text


def test_a_follower_is_sent_nothing_until_the_session_moves_then_only_what_changed(
        long_store: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "LIVE_SECONDS", 0.5)  # the event stream ends after 0.5 s
    monkeypatch.setattr(server, "POLL_SECONDS", 0.05)
    store, sid = copy_of(long_store, tmp_path)
    db = sqlite3.connect(tmp_path / "s.db")
    data = db.execute("SELECT data FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
    with client(app(store=store)) as http:
        page = http.get(f"/sessions/{sid}").text
        since = re.findall(r'data-since="(\w+)"', page)[0]
        corrupt(tmp_path / "s.db", sid)  # from here, reading the session whole fails
        events = http.get(f"/sessions/{sid}/events").text
        unchanged = http.get(f"/sessions/{sid}/part", params={"from": "9999"},
                             headers={"If-None-Match": f'"{since}"'})
        db.execute("UPDATE sessions SET data = ? WHERE id = ?", (data, sid))
        db.commit()
        decided = http.post(f"/sessions/{sid}/decide", data={
            "csrf": hidden(page, "csrf"), "version": hidden(page, "version"),
            "call_id": "", "decision": "approve"}, follow_redirects=False)
        moved = http.get(f"/sessions/{sid}/part", params={"from": "9999"},
                         headers={"If-None-Match": f'"{since}"'})
    db.close()
    # following a waiting session never read it whole: its stamp is read from columns
    assert events == f"retry: 3000\n\nevent: changed\ndata: {since}\n\n"
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert decided.status_code == 303
    assert moved.status_code == 200 and len(moved.content) < 20_000
    assert shown_steps(moved.text) == [STEPS - 1] and "data-partial" in moved.text
    assert ">approved<" in moved.text and moved.headers["etag"] != f'"{since}"'
    assert f'data-since="{since}"' not in moved.text


def test_the_list_reads_no_sessions_json(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    for n in range(3):
        session = AgentSession.start(f"question {n}", id=f"s{n}", at=1.0 + n)
        session.add_usage(TokenUsage(prompt_tokens=1000 + n, completion_tokens=1))
        store.save(session)
    corrupt(tmp_path / "s.db", "s1")
    with client(app(store=store)) as http:
        listed = http.get("/sessions")
        shown = http.get("/sessions/s1")
    assert listed.status_code == 200
    assert re.findall(r'<a class="id" href="/sessions/(s\d)"', listed.text) == ["s2", "s1", "s0"]
    assert "1,002" in listed.text  # the damaged session's tokens, from their column
    assert shown.status_code == 500 and "damaged" in shown.text


class SlowStore(SQLiteStore):
    """A store whose reading of one session waits until the test lets it go on."""

    def __init__(self, path: Path, slow: str) -> None:
        super().__init__(path)
        self.slow, self.entered, self.release = slow, threading.Event(), threading.Event()

    def load(self, session_id: str) -> AgentSession:
        if session_id == self.slow:
            self.entered.set()
            self.release.wait(60)
        return super().load(session_id)


def test_a_slow_read_stalls_no_other_page(tmp_path: Path) -> None:
    store = SlowStore(tmp_path / "s.db", slow="slow")
    for sid in ("slow", "quick"):
        store.save(AgentSession.start(f"question {sid}", id=sid, at=1.0))
    answers: dict[str, Any] = {}
    with client(app(store=store)) as http:

        def get(path: str) -> None:
            answers[path] = http.get(path)

        reading = threading.Thread(target=get, args=("/sessions/slow",))
        reading.start()
        assert store.entered.wait(30)
        listing = threading.Thread(target=get, args=("/sessions",))
        listing.start()
        listing.join(30)  # bounded; answered at once unless the slow read holds the loop
        answered_meanwhile = "/sessions" in answers
        store.release.set()
        reading.join(30)
        listing.join(30)
    assert answered_meanwhile
    assert "question quick" in answers["/sessions"].text
    assert answers["/sessions/slow"].status_code == 200


def test_the_trace_is_read_as_it_grows(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    for sid in ("a", "b"):
        store.save(AgentSession.start(f"question {sid}", id=sid, at=1.0))
    trace = tmp_path / "runs.jsonl"
    first = run_started("a")
    trace.write_bytes(first)
    with client(app(store=store, trace=trace)) as http:
        before = http.get("/sessions/a").text
        # the file's first line is overwritten in place: a reader of the whole file would
        # lose a's run; one that reads only what was appended since keeps it
        with trace.open("r+b") as file:
            file.write(b"x" * (len(first) - 1))
        with trace.open("ab") as file:
            file.write(run_started("b"))
        after = [http.get("/sessions/a").text, http.get("/sessions/b").text]
    assert "Trace report" in before
    assert all("Trace report" in page for page in after)


def run_started(sid: str) -> bytes:
    return json.dumps({"kind": "run_started", "session_id": sid, "span_id": f"r-{sid}",
                       "at": 1.0, "question": f"question {sid}"}).encode() + b"\n"

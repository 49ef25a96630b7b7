"""Cancelling checks the page's version on the session as saved, under its lease: a call
decided in another process between the page's read and the cancel wins, and the stale page
changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

from starlette.testclient import TestClient
from test_sessions_http import form_of
from ui_support import LOCAL, act, waiting_agent

from miniagent import SQLiteStore
from miniagent.core.session import decide
from miniagent.ui import app

BASE = "http://127.0.0.1:8765"


class DecidedMeanwhile(SQLiteStore):
    """A store in which another process decides the session's calls just before the next
    lease is taken (the window between reading the session and acting on it)."""

    race = False

    def acquire(self, session_id: str, owner: str, *, force: bool = False) -> None:
        if self.race:
            self.race = False
            elsewhere = SQLiteStore(self.path)  # as `miniagent sessions approve` would
            elsewhere.update(session_id, lambda s: decide(s, None, True, None, at=time.time()))
        super().acquire(session_id, owner, force=force)


def test_a_cancel_from_a_page_gone_stale_meanwhile_changes_nothing(tmp_path: Path) -> None:
    _, _, sid = waiting_agent(tmp_path / "s.db", [act("pay", {"to": "A", "amount": 1})])
    store = DecidedMeanwhile(tmp_path / "s.db")
    with TestClient(app(store=store), client=LOCAL, base_url=BASE,
                    headers={"Origin": BASE}) as http:
        page = http.get(f"/sessions/{sid}").text
        store.race = True
        done = http.post(f"/sessions/{sid}/cancel", data=form_of(page, "cancel"))
    assert done.status_code == 409 and "changed since the page was shown" in done.text
    saved = SQLiteStore(tmp_path / "s.db").load(sid)
    assert saved.status != "cancelled"
    assert [r.state for r in saved.steps[-1].calls] == ["approved"]

"""Sessions whose ids hold ``/``, are ``.`` or ``..``, or look like the inbox's own spelling
route like any other: their pages, live parts, events and decisions reach them."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from ui_support import LOCAL, PAID, act, hidden, pay

from miniagent import Agent, ScriptedModel, SQLiteStore
from miniagent.ui import app
from miniagent.ui.paths import segment

BASE = "http://127.0.0.1:8765"
ODD = ["team/a", "team/a/decide", "..", ".", "~dGVhbS9h", "a%2Fb", "问题/x?y#z", "part"]


@pytest.mark.parametrize("sid", ODD)
def test_a_session_with_an_odd_id_is_shown_and_decided(tmp_path: Path, sid: str) -> None:
    PAID.clear()
    agent = Agent(model=ScriptedModel([act("pay", {"to": "Alice", "amount": 30}),
                                       "Final Answer: paid"]),
                  tools=[pay], store=SQLiteStore(tmp_path / "s.db"))
    assert agent.run("Pay Alice", session_id=sid).status == "awaiting_approval"
    with TestClient(app(agent), client=LOCAL, base_url=BASE, headers={"Origin": BASE}) as http:
        inbox = http.get("/").text
        link = re.search(r'<h2><a href="([^"]+)">Pay Alice</a>', inbox)
        assert link is not None and "/" not in link.group(1)[len("/sessions/"):]
        page = http.get(link.group(1))
        assert page.status_code == 200
        assert f'session <span class="id">{escape(sid)}</span>' in page.text
        live = re.search(r'data-part="([^"]+)"', page.text)
        assert live is not None and http.get(live.group(1)).status_code == 200
        action = re.search(r'<form method="post" action="([^"]+/decide)"', page.text)
        assert action is not None
        done = http.post(action.group(1), data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"),
            "call_id": hidden(page.text, "call_id"), "decision": "approve"})
        assert done.status_code == 200 and "Approved call" in done.text
        for _ in range(500):  # bounded wait for the run this server started
            if agent.store.load(sid).status == "completed":
                break
            http.get(link.group(1))
    assert agent.store.load(sid).final_answer == "paid"
    assert PAID == ["30 to Alice"]


def test_ids_and_their_spelling_never_meet() -> None:
    spelled = {segment(sid) for sid in [*ODD, "~", "", "a", "~Li4"]}
    assert len(spelled) == len(ODD) + 4
    assert all("/" not in s and s not in (".", "..") for s in spelled)

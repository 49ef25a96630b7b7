"""The sessions list and a session's page over HTTP: filters, keyset pages, resume, cancel,
the next question of a conversation, and the trace report rendered by the report's code."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient
from ui_support import LOCAL, act, hidden, pay, waiting_agent

from miniagent import Agent, ScriptedModel, SQLiteStore
from miniagent.core.errors import ModelConnectionError
from miniagent.core.session import AgentSession, ForkedFrom
from miniagent.observe.reader import Trace, read_trace
from miniagent.report.html import csp
from miniagent.report.trace import SCRIPT, render_trace
from miniagent.ui import app

BASE = "http://127.0.0.1:8765"


def client(inbox: object) -> TestClient:
    return TestClient(inbox, client=LOCAL, base_url=BASE, headers={"Origin": BASE})  # type: ignore[arg-type]


def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):  # bounded; not a timing assert
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


def form_of(page: str, action: str) -> dict[str, str]:
    """The hidden fields of the form posting to ``action``."""
    found = re.search(rf'<form method="post" action="[^"]*/{action}"[^>]*>(.*?)</form>', page)
    assert found is not None, f"no {action} form"
    return dict(re.findall(r'name="(\w+)" value="([^"]*)"', found.group(1)))


def test_the_list_pages_and_filters(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    for n in range(120):
        session = AgentSession.start(f"question {n} {'支付' if n % 10 == 0 else 'weather'}",
                                     id=f"s{n:04d}", at=1000.0 + n)
        if n % 3 == 0:
            session.transition("awaiting_approval", "waits", at=1000.0 + n)
        store.save(session)
    seen: list[str] = []
    with client(app(store=store)) as http:
        url: str | None = "/sessions"
        while url is not None:
            page = http.get(url).text
            seen += re.findall(r'<a class="id" href="/sessions/(s\d+)"', page)
            more = re.search(r'<a rel="next" href="([^"]*)"', page)
            url = more.group(1).replace("&amp;", "&") if more else None
        assert seen == [f"s{n:04d}" for n in reversed(range(120))]  # newest first, each once
        waiting = http.get("/sessions", params={"status": "awaiting_approval", "q": "支付"}).text
        assert re.findall(r'<a class="id" href="/sessions/(s\d+)"', waiting) == [
            "s0090", "s0060", "s0030", "s0000"]
        assert "No session matches" in http.get("/sessions", params={"q": "nothing"}).text


def test_cancel_with_a_reason(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [act("pay", {"to": "A", "amount": 1})])
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
        done = http.post(f"/sessions/{sid}/cancel",
                         data={**form_of(page, "cancel"), "reason": "wrong account"})
    assert done.status_code == 200 and f"Cancelled session {sid}" in done.text
    saved = SQLiteStore(tmp_path / "s.db").load(sid)
    assert (saved.status, saved.reason) == ("cancelled", "wrong account")


def test_resume_after_an_error(tmp_path: Path) -> None:
    model = ScriptedModel([ModelConnectionError("the server went away"),
                           "Final Answer: back again"])
    agent = Agent(model=model, store=SQLiteStore(tmp_path / "s.db"))
    result = agent.run("Are you there?")
    assert result.status == "error"
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{result.session_id}").text
        done = http.post(f"/sessions/{result.session_id}/resume", data=form_of(page, "resume"))
        assert "resumed in this server" in done.text
        until(lambda: "back again" in http.get(f"/sessions/{result.session_id}").text, "answer")


def test_continue_the_conversation(tmp_path: Path) -> None:
    model = ScriptedModel(["Final Answer: 4", "Final Answer: 8"])
    agent = Agent(model=model, store=SQLiteStore(tmp_path / "s.db"))
    sid = agent.run("2 + 2?").session_id
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
        http.post(f"/sessions/{sid}/ask",
                  data={**form_of(page, "ask"), "question": "and doubled?"})
        until(lambda: '<pre class="answer">8</pre>' in http.get(f"/sessions/{sid}").text,
              "the 2nd answer")
        shown = http.get(f"/sessions/{sid}").text
    assert "Turn 2: and doubled?" in shown
    assert [m["content"] for m in model.requests[-1].messages if m["role"] == "user"][-1] == \
        "and doubled?"
    assert len(SQLiteStore(tmp_path / "s.db").load(sid).turns) == 2


def test_the_trace_report_of_a_session(tmp_path: Path) -> None:
    trace = tmp_path / "runs.jsonl"
    model = ScriptedModel([act("pay", {"to": "Alice", "amount": 30}), "Final Answer: paid"])
    agent = Agent(model=model, tools=[pay], store=SQLiteStore(tmp_path / "s.db"), trace=trace)
    sid = agent.run("Pay Alice 30 euros").session_id
    Agent(model=ScriptedModel(["Final Answer: 4"]), store=agent.store, trace=trace).run("2+2?")
    with client(app(agent)) as http:
        page = http.get("/").text
        http.post(f"/sessions/{sid}/decide", data={
            "csrf": hidden(page, "csrf"), "version": hidden(page, "version"),
            "call_id": hidden(page, "call_id"), "decision": "approve"})
        until(lambda: 'data-status="completed"' in http.get(f"/sessions/{sid}").text, "done")
        assert f'href="/sessions/{sid}/report"' in http.get(f"/sessions/{sid}").text
        report = http.get(f"/sessions/{sid}/report")
        missing = http.get("/sessions/nope/report")
    read = read_trace(trace)
    mine = [r for r in read.runs if r.session_id == sid]
    assert len(mine) == 2 and len(read.runs) == 3  # the first run, and the resumed one
    assert report.text == render_trace(Trace(path=read.path, runs=mine, skipped=[]),
                                       back=(f"/sessions/{sid}", "← Back to the session"))
    assert report.headers["content-security-policy"].startswith(csp(SCRIPT))
    assert missing.status_code == 404


def test_an_id_with_odd_characters_is_linked_whole(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.save(AgentSession.start("odd", id="会话 1?x=1#y&z", at=1.0))
    with client(app(store=store)) as http:
        listed = http.get("/sessions").text
        link = re.search(r'<a class="id" href="([^"]*)"', listed)
        assert link is not None
        page = http.get(link.group(1).replace("&amp;", "&"))
    assert page.status_code == 200 and "会话 1?x=1#y&amp;z" in page.text


def test_the_event_stream_of_an_ended_session_says_so_and_ends(tmp_path: Path) -> None:
    agent = Agent(model=ScriptedModel(["Final Answer: 4"]), store=SQLiteStore(tmp_path / "s.db"))
    sid = agent.run("2 + 2?").session_id
    with client(app(agent)) as http:
        body = http.get(f"/sessions/{sid}/events").text  # it ends: the session has ended
        version = re.search(r'data-since="(\w+)"', http.get(f"/sessions/{sid}").text)
    assert version is not None
    assert body == f"retry: 3000\n\nevent: changed\ndata: {version.group(1)}\n\n" \
                   "event: end\ndata: ended\n\n"


def test_fork_a_session_from_its_page_and_continue_the_fork(tmp_path: Path) -> None:
    model = ScriptedModel(["Final Answer: Alice is next", "Final Answer: Bob is next"])
    agent = Agent(model=model, store=SQLiteStore(tmp_path / "s.db"))
    sid = agent.run("Who is next?").session_id
    before = SQLiteStore(tmp_path / "s.db").load(sid).to_dict()
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
        assert 'name="at_step" type="number" min="0" max="1" value="1"' in page
        refused = http.post(f"/sessions/{sid}/fork", data={**form_of(page, "fork"),
                                                           "at_step": "7"})
        assert refused.status_code == 409
        assert "not forked: session" in refused.text and "from 0 to 1, not 7" in refused.text
        done = http.post(f"/sessions/{sid}/fork", data={**form_of(page, "fork"),
                                                        "at_step": "0"})
        child = re.search(r'<span class="id">(\w+)</span>', done.text)
        assert child is not None and child.group(1) != sid
        assert f"Forked session {sid} at step 0: this is the new session (running)" in done.text
        http.post(f"/sessions/{child.group(1)}/resume", data=form_of(done.text, "resume"))
        until(lambda: "Bob is next" in http.get(f"/sessions/{child.group(1)}").text, "answer")
    forked = SQLiteStore(tmp_path / "s.db").load(child.group(1))
    assert (forked.forked_from, forked.final_answer) == (
        ForkedFrom(session_id=sid, step=0), "Bob is next")
    assert SQLiteStore(tmp_path / "s.db").load(sid).to_dict() == before


def test_a_running_session_that_no_process_holds_is_listed_as_interrupted(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.save(AgentSession.start("left running", id="s-orphan", at=1000.0))  # no lease
    held = AgentSession.start("held here", id="s-held", at=1001.0)
    store.save(held)
    store.acquire(held.id, "owner-here")  # not a host:pid owner: only its expiry can end it
    with client(app(store=store)) as http:
        page = http.get("/sessions").text
    rows = dict(re.findall(r'href="/sessions/(s-\w+)">.*?<span class="tag[^>]*>([^<]+)</span>',
                           page))
    assert rows == {"s-orphan": "interrupted", "s-held": "running"}

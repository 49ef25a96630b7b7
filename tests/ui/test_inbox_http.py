"""The inbox over plain HTTP: decisions take the CLI's path and resume the run; stale pages,
requests without a CSRF token or from another origin change nothing; hostile text stays text."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from ui_support import HOSTILE, LOCAL, PAID, act, hidden, waiting_agent

from miniagent import Agent, ScriptedModel, SQLiteStore, tool
from miniagent.core.store.base import new_owner
from miniagent.core.store.listing import SessionQuery
from miniagent.ui import app

BASE = "http://127.0.0.1:8765"
PAY = act("pay", {"to": "Alice", "amount": 30})


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    PAID.clear()
    yield


def client(inbox: object, origin: str | None = BASE) -> TestClient:
    headers = {"Origin": origin} if origin else {}
    return TestClient(inbox, client=LOCAL, base_url=BASE, headers=headers)  # type: ignore[arg-type]


def until(check: Callable[[], bool], what: str) -> None:
    """Wait until ``check()`` (a bounded number of tries; not a timing assert)."""
    for _ in range(500):
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


def decision(page: str, choice: str, reason: str = "") -> dict[str, str]:
    return {"csrf": hidden(page, "csrf"), "version": hidden(page, "version"),
            "call_id": hidden(page, "call_id"), "decision": choice, "reason": reason}


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_approving_resumes_the_session_to_its_answer(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.db" if kind == "sqlite" else None
    agent, _, sid = waiting_agent(path, [PAY, "Final Answer: Alice is paid"])
    with client(app(agent)) as http:
        page = http.get("/")
        assert page.status_code == 200 and "Pay Alice 30 euros" in page.text
        form = decision(page.text, "approve")
        done = http.post(f"/sessions/{sid}/decide", data=form)
        assert done.status_code == 200 and f"Approved call {form['call_id']}" in done.text
        until(lambda: "Alice is paid" in http.get(f"/sessions/{sid}").text, "the answer")
        again = http.post(f"/sessions/{sid}/decide", data=form)  # the same, once more
        assert "Nothing waits for a person" in http.get("/").text
    assert again.status_code == 409 and "changed since the page was shown" in again.text
    assert PAID == ["30 to Alice"]  # once
    assert agent.store.load(sid).status == "completed"


def test_a_denial_and_its_reason_reach_the_model(tmp_path: Path) -> None:
    agent, model, sid = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: I did not pay"])
    with client(app(agent)) as http:
        page = http.get("/").text
        http.post(f"/sessions/{sid}/decide",
                  data=decision(page, "deny", "Alice was paid yesterday; 支付已完成"))
        until(lambda: "I did not pay" in http.get(f"/sessions/{sid}").text, "the answer")
    told = model.requests[-1].messages[-1]["content"]
    assert "denied" in told and "Alice was paid yesterday; 支付已完成" in told
    assert PAID == []


def test_a_call_decided_elsewhere_is_not_decided_again(tmp_path: Path) -> None:
    """The page was shown, then the CLI's path denied the call: approving from the stale page
    is refused, with a message, and the call stays denied."""
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    with client(app(store=agent.store)) as http:
        page = http.get("/").text
        agent.deny(sid, reason="no")  # elsewhere: the CLI's `sessions deny`
        refused = http.post(f"/sessions/{sid}/decide", data=decision(page, "approve"))
    assert refused.status_code == 409 and "nothing was changed" in refused.text
    record = SQLiteStore(tmp_path / "s.db").load(sid).steps[-1].calls[0]
    assert record.state == "denied" and PAID == []


def test_a_session_another_process_runs_is_busy(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    other = SQLiteStore(tmp_path / "s.db")
    other.acquire(sid, new_owner())  # a live process (this one) holds the lease
    with client(app(store=agent.store)) as http:
        page = http.get("/").text
        refused = http.post(f"/sessions/{sid}/decide", data=decision(page, "approve"))
    assert refused.status_code == 409 and "busy" in refused.text
    assert SQLiteStore(tmp_path / "s.db").load(sid).steps[-1].calls[0].state == \
        "awaiting_approval"


def test_without_an_agent_the_decision_says_how_to_resume(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    with client(app(store=agent.store)) as http:
        page = http.get("/").text
        done = http.post(f"/sessions/{sid}/decide", data=decision(page, "approve"))
    assert f"miniagent sessions resume {sid}" in done.text
    assert SQLiteStore(tmp_path / "s.db").load(sid).steps[-1].calls[0].state == "approved"


def test_a_post_without_csrf_token_is_refused(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    with client(app(agent)) as http:
        form = decision(http.get("/").text, "approve")
        missing = http.post(f"/sessions/{sid}/decide", data={**form, "csrf": ""})
        wrong = http.post(f"/sessions/{sid}/decide", data={**form, "csrf": "0" * 64})
        http.cookies.clear()  # another browser: its own cookie, the old token is not its own
        other = http.post(f"/sessions/{sid}/decide", data=form)
    assert missing.status_code == wrong.status_code == other.status_code == 403
    assert "CSRF" in missing.text
    assert SQLiteStore(tmp_path / "s.db").load(sid).status == "awaiting_approval"


@pytest.mark.parametrize("headers", [{"Origin": "http://evil.example"},
                                     {"Origin": "http://127.0.0.1:9999"},
                                     {"Referer": "http://evil.example/page"},
                                     {}])
def test_a_post_from_another_origin_is_refused(tmp_path: Path, headers: dict[str, str]) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    with client(app(agent), origin=None) as http:
        form = decision(http.get("/").text, "approve")
        refused = http.post(f"/sessions/{sid}/decide", data=form, headers=headers)
    assert refused.status_code == 403 and "refused" in refused.text
    assert SQLiteStore(tmp_path / "s.db").load(sid).status == "awaiting_approval"


def test_a_post_with_its_referer_alone_is_accepted(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY, "Final Answer: ok"])
    with client(app(agent), origin=None) as http:
        form = decision(http.get("/").text, "approve")
        done = http.post(f"/sessions/{sid}/decide", data=form, headers={"Referer": BASE + "/"})
        assert done.status_code == 200
        until(lambda: SQLiteStore(tmp_path / "s.db").load(sid).status == "completed", "done")


def test_another_host_name_is_refused(tmp_path: Path) -> None:
    """A site that points its name at 127.0.0.1 (DNS rebinding) reaches nothing."""
    agent, _, _ = waiting_agent(tmp_path / "s.db", [PAY])
    with TestClient(app(agent), client=LOCAL, base_url="http://rebound.example:8765") as http:
        refused = http.get("/")
    assert refused.status_code == 421 and "Pay Alice" not in refused.text


def test_every_page_carries_a_strict_policy_and_a_safe_cookie(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    with client(app(agent)) as http:
        for path in ("/", "/sessions", f"/sessions/{sid}", f"/sessions/{sid}/part"):
            response = http.get(path)
            policy = response.headers["content-security-policy"]
            assert "default-src 'none'" in policy and "script-src 'self'" in policy
            assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
            assert response.headers["x-content-type-options"] == "nosniff"
        first = TestClient(app(agent), client=LOCAL, base_url=BASE).get("/")
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_hostile_text_stays_text(tmp_path: Path) -> None:
    agent, _, sid = waiting_agent(
        tmp_path / "s.db", [act("pay", {"to": HOSTILE * 10, "amount": 1}),
                            "Thought: " + HOSTILE + "\nFinal Answer: " + HOSTILE],
        question="Pay " + HOSTILE)
    with client(app(agent)) as http:
        pages = [http.get("/").text, http.get(f"/sessions/{sid}").text,
                 http.get("/sessions", params={"q": HOSTILE}).text,
                 http.get(f"/sessions/{sid}/part").text]
    for page in pages:
        assert "<script>window" not in page and "<img" not in page
        assert 'href="javascript' not in page
    assert "&lt;/script&gt;&lt;script&gt;window.pwned=1" in pages[0]
    assert "<details" in pages[0]  # the long argument is folded


@tool(requires_approval=True)
def delete_file(name: str) -> str:
    """Delete a file of the workspace."""
    DELETED.append(name)
    return f"deleted {name}"


DELETED: list[str] = []


def test_a_sub_agents_call_is_decided_on_its_parent_and_relayed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    janitor = Agent(model=ScriptedModel([act("delete_file", {"name": "old.log"}),
                                         "Final Answer: deleted old.log"]),
                    tools=[delete_file], store=store)
    boss = Agent(model=ScriptedModel([act("janitor", {"question": "Remove old.log"}),
                                      "Final Answer: the janitor deleted old.log"]),
                 tools=[janitor.as_tool(name="janitor", description="Cleans up files.")],
                 store=store)
    sid = boss.run("Clean up old.log").session_id
    sub_id = next(r.session_id for r in store.page(SessionQuery(limit=5)) if r.session_id != sid)
    with client(app(boss)) as http:
        inbox = http.get("/").text
        assert inbox.count('class="card waiting"') == 1  # the parent's card only
        assert "sub-agent janitor" in inbox and "old.log" in inbox
        sub_page = http.get(f"/sessions/{sub_id}").text
        assert f"parent session {sid}" in sub_page and "<button" not in sub_page
        refused = http.post(f"/sessions/{sub_id}/decide", data={  # a hand-made request
            "csrf": hidden(inbox, "csrf"),
            "version": re.findall(r'data-version="(\w+)"', sub_page)[0],
            "call_id": "", "decision": "approve"})
        assert refused.status_code == 409 and "decide on its parent session" in refused.text
        http.post(f"/sessions/{sid}/decide", data=decision(inbox, "approve", "only a log"))
        until(lambda: "the janitor deleted old.log" in http.get(f"/sessions/{sid}").text,
              "the boss's answer")
    assert DELETED == ["old.log"]
    assert SQLiteStore(tmp_path / "s.db").load(sub_id).status == "completed"


def test_without_a_token_a_remote_peer_is_refused_whatever_host_it_names(
        tmp_path: Path) -> None:
    """``app()`` mounted in a server of one's own: the Host header is the client's word; a
    request from another machine claiming ``Host: 127.0.0.1`` approves nothing."""
    agent, _, sid = waiting_agent(tmp_path / "s.db", [PAY])
    local = client(app(agent))
    with local:
        form = decision(local.get("/").text, "approve")
    with TestClient(app(agent), client=("203.0.113.7", 40000), base_url=BASE,
                    headers={"Origin": BASE}) as remote:
        shown = remote.get("/")
        posted = remote.post(f"/sessions/{sid}/decide", data=form)
    assert shown.status_code == 403 and "Pay Alice" not in shown.text
    assert posted.status_code == 403
    assert agent.store.load(sid).status == "awaiting_approval" and not PAID


def test_behind_a_token_a_remote_peer_logs_in_first(tmp_path: Path) -> None:
    agent, _, _ = waiting_agent(tmp_path / "s.db", [PAY])
    token = "a-token-of-24-characters"
    inbox = app(agent, token=token, allowed_hosts=["*"])
    with TestClient(inbox, client=("203.0.113.7", 40000), base_url=BASE,
                    headers={"Origin": BASE}) as remote:
        assert remote.get("/", follow_redirects=False).status_code == 303
        assert remote.post("/login", data={"token": token},
                           follow_redirects=False).status_code == 303
        assert "Pay Alice" in remote.get("/").text
    with TestClient(inbox, client=("127.0.0.1", 40000), base_url=BASE) as local:
        link = inbox.state.gate.new_link()
        assert local.get(f"/login?once={link}", follow_redirects=False).status_code == 303
        assert "Pay Alice" in local.get("/").text

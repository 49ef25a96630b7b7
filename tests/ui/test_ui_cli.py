"""`miniagent ui` as a person starts it: a session left waiting by `miniagent run --detach` is
approved in the inbox and runs on in the inbox's process with what it recorded; every address
asks for a login (a one-time link, or the token), loopback included."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx2 as httpx
from served import served, write_tools
from typer.testing import CliRunner
from ui_support import act, hidden

from miniagent.cli import app
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.testing.stub_server import StubServer

TOKEN = "a-token-of-24-characters"


def test_a_detached_session_is_approved_in_the_inbox_and_runs_on(tmp_path: Path) -> None:
    store, tools = tmp_path / "s.db", write_tools(tmp_path)
    script = [act("pay", {"to": "Bob", "amount": 5}), "Thought: done\nFinal Answer: Bob has 5"]
    with StubServer(script).run_in_thread() as stub:
        started = CliRunner().invoke(app, [
            "run", "Pay Bob 5 euros", "--base-url", stub.base_url, "--model", "stub",
            "--mode", "react", "--tools", str(tools), "--store", str(store), "--detach",
            "--json"])
        sid = json.loads(started.stdout)["session_id"]
        assert json.loads(started.stdout)["status"] == "awaiting_approval"
        with served("--store", str(store)) as inbox, inbox.client(
                headers={"Origin": inbox.url.rstrip("/")}) as http:
            page = http.get("/").text
            assert "Pay Bob 5 euros" in page and "pay" in page
            form = {name: hidden(page, name) for name in ("csrf", "version", "call_id")}
            done = http.post(f"/sessions/{sid}/decide",
                             data={**form, "decision": "approve"}, follow_redirects=True)
            assert done.status_code == 200 and "resumed in this server" in done.text
            for _ in range(500):  # bounded; not a timing assert
                if SQLiteStore(store).load(sid).status == "completed":
                    break
                time.sleep(0.02)
            shown = http.get(f"/sessions/{sid}").text
    assert "Bob has 5" in shown and 'data-status="completed"' in shown
    assert (tmp_path / "paid.txt").read_text() == "5 to Bob\n"
    assert len(stub.requests) == 2  # the question, then the observation


def test_off_loopback_a_token_is_required(tmp_path: Path) -> None:
    refused = CliRunner().invoke(app, ["ui", "--host", "0.0.0.0", "--store",
                                       str(tmp_path / "s.db")])
    assert refused.exit_code == 2 and "--token-env" in refused.stderr
    short = CliRunner().invoke(app, ["ui", "--host", "0.0.0.0", "--token-env", "T"],
                               env={"T": "short"})
    assert short.exit_code == 2 and "at least 16" in short.stderr


def test_with_a_token_a_person_logs_in_once(tmp_path: Path) -> None:
    env = {"INBOX_TOKEN": TOKEN}
    with served("--store", str(tmp_path / "s.db"), "--token-env", "INBOX_TOKEN",
                env=env) as inbox, httpx.Client(base_url=inbox.url) as http:
        url = inbox.url
        assert inbox.token is None  # a token given in the environment is never printed
        first = http.get("/")
        assert first.status_code == 303 and first.headers["location"] == "/login"
        assert http.get("/sessions/x/part").status_code == 303
        origin = {"Origin": url.rstrip("/")}
        wrong = http.post("/login", data={"token": "not-the-token-at-all"}, headers=origin)
        assert wrong.status_code == 403 and "miniagent_ui" not in wrong.headers.get(
            "set-cookie", "")
        right = http.post("/login", data={"token": TOKEN}, headers=origin)
        assert right.status_code == 303
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert http.get("/").status_code == 200  # the cookie is enough from now on
        http.cookies.clear()
        by_link = http.get(f"/login?token={TOKEN}")  # a token in a URL: history, logs
        assert by_link.status_code == 400 and "not accepted" in by_link.text
        assert TOKEN not in by_link.text and "miniagent_ui" not in by_link.headers.get(
            "set-cookie", "")
        assert http.get("/sessions").status_code == 303  # still not logged in


def test_eval_reports_are_served_from_the_folder_given(tmp_path: Path) -> None:
    (tmp_path / "evals" / "nightly").mkdir(parents=True)
    report = {"tasks": 0, "runs": 0, "modes": [], "by_mode": {}, "results": []}
    (tmp_path / "evals" / "nightly" / "report.json").write_text(json.dumps(report),
                                                                 encoding="utf-8")
    missing = CliRunner().invoke(app, ["ui", "--store", str(tmp_path / "s.db"), "--evals",
                                       str(tmp_path / "nowhere")])
    assert missing.exit_code != 0 and "no such folder" in missing.output + missing.stderr
    with served("--store", str(tmp_path / "s.db"), "--evals", str(tmp_path / "evals")) as inbox, \
            inbox.client() as http:
        listing = http.get("/evals").text
        shown = http.get("/evals/report", params={"run": "nightly"})
    assert ">nightly</a>" in listing
    assert shown.status_code == 200 and "miniagent eval: 0 tasks" in shown.text


def test_on_loopback_too_nothing_is_shown_before_a_login(tmp_path: Path) -> None:
    """Another user of this machine reaches 127.0.0.1 too: without the token or the link
    printed at start, no page shows and no decision is taken."""
    with served("--store", str(tmp_path / "s.db")) as inbox, \
            httpx.Client(base_url=inbox.url) as stranger:
        assert inbox.token is not None and len(inbox.token) >= 16
        assert stranger.get("/").status_code == 303  # to /login
        assert stranger.get("/sessions").status_code == 303
        posted = stranger.post("/sessions/s1/decide", data={"decision": "approve"},
                               headers={"Origin": inbox.url.rstrip("/")})
        assert posted.status_code == 401
        guessed = stranger.get(inbox.link[:-4] + "AAAA")
        assert guessed.status_code == 403 and "miniagent_ui" not in guessed.headers.get(
            "set-cookie", "")
        with inbox.client() as owner:  # the link printed at start
            assert owner.get("/").status_code == 200
        again = stranger.get(inbox.link)  # it worked once: history keeps nothing that works
        assert again.status_code == 403 and "used already" in again.text
        typed = stranger.post("/login", data={"token": inbox.token},
                              headers={"Origin": inbox.url.rstrip("/")})
        assert typed.status_code == 303
        assert stranger.get("/sessions").status_code == 200


def test_another_loopback_address_answers_its_own_url(tmp_path: Path) -> None:
    with served("--store", str(tmp_path / "s.db"), "--host", "127.0.0.2") as inbox, \
            inbox.client() as http:
        assert inbox.url.startswith("http://127.0.0.2:")
        assert http.get("/sessions").status_code == 200


def test_a_record_given_through_run_metadata_is_never_imported_or_connected(
        tmp_path: Path) -> None:
    """A Python application's caller can set a session's metadata: a ``cli`` record naming a
    tools file and a model server there must not make the inbox (or a resume) import that
    file or send anything to that server."""
    from miniagent import Agent, ScriptedModel, tool

    evil = tmp_path / "evil_tools.py"
    evil.write_text(f"open({str(tmp_path / 'imported.txt')!r}, 'w').write('ran')\n",
                    encoding="utf-8")

    @tool(requires_approval=True)
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return "paid"

    store = tmp_path / "s.db"
    with StubServer(["Final Answer: stolen"]).run_in_thread() as stub:
        agent = Agent(model=ScriptedModel([act("pay", {"to": "Bob", "amount": 5})]),
                      tools=[pay], store=SQLiteStore(store))
        forged = {"cli": {"base_url": stub.base_url, "model": "m", "tools": [str(evil)]}}
        sid = agent.run("Pay Bob", metadata=forged).session_id
        with served("--store", str(store)) as inbox, inbox.client(
                headers={"Origin": inbox.url.rstrip("/")}) as http:
            page = http.get("/").text
            assert "was not written by miniagent" in page  # shown beside the decision
            form = {name: hidden(page, name) for name in ("csrf", "version", "call_id")}
            done = http.post(f"/sessions/{sid}/decide",
                             data={**form, "decision": "approve"}, follow_redirects=True)
            assert done.status_code == 200
        resumed = CliRunner().invoke(app, ["sessions", "resume", sid, "--store", str(store)])
    assert "did not write" in resumed.stderr
    assert not (tmp_path / "imported.txt").exists()
    assert stub.requests == []


def test_the_approval_page_shows_what_the_session_goes_on_with(tmp_path: Path) -> None:
    store, tools = tmp_path / "s.db", write_tools(tmp_path)
    with StubServer([act("pay", {"to": "Bob", "amount": 5})]).run_in_thread() as stub:
        started = CliRunner().invoke(app, [
            "run", "Pay Bob 5 euros", "--base-url", stub.base_url, "--model", "stub",
            "--mode", "react", "--tools", str(tools), "--store", str(store), "--detach",
            "--json"])
        assert json.loads(started.stdout)["status"] == "awaiting_approval"
        with served("--store", str(store)) as inbox, inbox.client() as http:
            page = http.get("/").text
    assert f"model server {stub.base_url} (stub)" in page and str(tools) in page


def test_a_strangers_wrong_tokens_do_not_lock_the_owner_out(tmp_path: Path) -> None:
    """Wrong tokens are throttled per client address: a stranger at 127.0.0.2 who used up its
    tries is refused even with the right token, while the owner at 127.0.0.1 logs in; and
    the one-time link printed at start logs in from the stranger's own address too (its code
    cannot be guessed, so no throttle stands before it)."""
    with served("--store", str(tmp_path / "s.db")) as inbox, httpx.Client(
            base_url=inbox.url, transport=httpx.HTTPTransport(local_address="127.0.0.2")
            ) as stranger, httpx.Client(base_url=inbox.url) as owner:
        origin = {"Origin": inbox.url.rstrip("/")}
        statuses = [stranger.post("/login", data={"token": f"guess-number-{n:04d}-xx"},
                                  headers=origin).status_code for n in range(25)]
        assert statuses[0] == 403 and statuses[-1] == 429
        assert stranger.post("/login", data={"token": inbox.token},
                             headers=origin).status_code == 429
        typed = owner.post("/login", data={"token": inbox.token}, headers=origin)
        assert typed.status_code == 303 and owner.get("/sessions").status_code == 200
        linked = stranger.get(inbox.link)  # the owner's link, opened on the throttled address
        assert linked.status_code == 303 and stranger.get("/sessions").status_code == 200


def test_half_sent_requests_are_closed_and_the_owner_is_served_meanwhile(
        tmp_path: Path) -> None:
    """50 requests whose head never ends (slowloris) are closed by the inbox within a bounded
    wait (its limit is 10 s), and the login page is served while they are open."""
    from urllib.parse import urlsplit

    from miniagent.testing.slow_clients import closed_by_server, stalled_requests

    with served("--store", str(tmp_path / "s.db")) as inbox:
        port = urlsplit(inbox.url).port
        assert port is not None
        with stalled_requests(port, 50, path="/login", wait=60) as stalled:
            with httpx.Client(base_url=inbox.url, timeout=30) as owner:
                assert owner.get("/login").status_code == 200
            assert all(closed_by_server(sock) for sock in stalled)
        with inbox.client() as owner:
            assert owner.get("/sessions").status_code == 200

"""A session's page in the inbox shows its final answer once, and the trace report opened from
it links back to it (issue 36)."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient
from ui_support import LOCAL

from miniagent import Agent, ScriptedModel, SQLiteStore
from miniagent.ui import app

BASE = "http://127.0.0.1:8765"
ANSWER = "forty-two point seven"


def client(inbox: object) -> TestClient:
    return TestClient(inbox, client=LOCAL, base_url=BASE, headers={"Origin": BASE})  # type: ignore[arg-type]


def test_the_final_answer_is_shown_once(tmp_path: Path) -> None:
    model = ScriptedModel([f"Thought: easy\nFinal Answer: {ANSWER}"])
    agent = Agent(model=model, store=SQLiteStore(tmp_path / "s.db"))
    sid = agent.run("What is it?").session_id
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
    assert page.count(ANSWER) == 1, page
    assert "<h2>Final answer</h2>" in page


def test_an_earlier_turns_answer_stays_in_its_step(tmp_path: Path) -> None:
    model = ScriptedModel([f"Final Answer: {ANSWER}", "Final Answer: the second"])
    agent = Agent(model=model, store=SQLiteStore(tmp_path / "s.db"))
    sid = agent.run("first?").session_id
    agent.run("second?", session_id=sid)
    with client(app(agent)) as http:
        page = http.get(f"/sessions/{sid}").text
    assert page.count(ANSWER) >= 1 and page.count("the second") == 1, page


def test_the_trace_report_links_back_to_the_session(tmp_path: Path) -> None:
    trace = tmp_path / "runs.jsonl"
    agent = Agent(model=ScriptedModel(["Final Answer: 4"]), store=SQLiteStore(tmp_path / "s.db"),
                  trace=trace)
    sid = agent.run("2+2?").session_id
    with client(app(agent)) as http:
        report = http.get(f"/sessions/{sid}/report").text
        back = re.search(r'<a class="back" href="([^"]+)">([^<]+)</a>', report)
        assert back is not None, report[:3000]
        assert back.group(1) == f"/sessions/{sid}"
        assert "session" in back.group(2).lower()
        assert 'data-status="completed"' in http.get(back.group(1)).text

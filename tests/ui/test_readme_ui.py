"""The docs' inbox example runs: the app it makes shows a waiting session and resumes it
once approved."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from ui_support import LOCAL, PAID, act, hidden, pay

from docs_pages import block_with
from miniagent import ScriptedModel


def test_the_inbox_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    PAID.clear()
    block = block_with("inbox = app(agent)")
    model = ScriptedModel([act("pay", {"to": "Alice", "amount": 30}), "Final Answer: paid"])
    names: dict[str, object] = {"model": model, "pay": pay}
    exec(block, names)
    agent = names["agent"]
    sid = agent.run("Pay Alice 30 euros").session_id  # type: ignore[attr-defined]
    base = "http://127.0.0.1:8321"
    with TestClient(names["inbox"], client=LOCAL, base_url=base,  # type: ignore[arg-type]
                    headers={"Origin": base}) as http:
        page = http.get("/").text
        http.post(f"/sessions/{sid}/decide", data={
            name: hidden(page, name) for name in ("csrf", "version", "call_id")
        } | {"decision": "approve"})
        for _ in range(500):  # bounded; not a timing assert
            if "Final answer" in http.get(f"/sessions/{sid}").text:
                break
            time.sleep(0.02)
    assert PAID == ["30 to Alice"] and (tmp_path / "sessions.db").exists()

"""The approval gauges read through a real SQLite store shared with another process's agent:
what the store says of each session (its revision first, the session itself only while it
still waits and has changed) ends the waits this process's events never will."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from miniagent import Agent, ScriptedModel, SQLiteStore, tool
from miniagent.core.models.describe import describe_model
from miniagent.observe import metrics as metrics_module
from miniagent.observe.metrics import Metrics


@tool(requires_approval=True)
def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


def paying(*names: str) -> dict[str, object]:
    return {"content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "pay", "arguments": json.dumps({"to": name})}}
        for i, name in enumerate(names)]}


def waiting_session(path: Path, metrics: Metrics, *names: str) -> str:
    agent = Agent(model=ScriptedModel([paying(*names)], tool_mode="native"), tools=[pay],
                  store=SQLiteStore(path))
    agent.subscribe(metrics)
    result = agent.run("pay them")
    assert result.status == "awaiting_approval"
    return result.session_id


def waiting_gauge(metrics: Metrics) -> str:
    """The ``miniagent_approvals_waiting`` line of a real scrape."""
    with metrics.serve("127.0.0.1:0") as server, \
            urllib.request.urlopen(server.url, timeout=10) as response:
        text = response.read().decode()
    return next(line for line in text.splitlines()
                if line.startswith("miniagent_approvals_waiting "))


@pytest.fixture(autouse=True)
def every_scrape_asks_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "STORE_CHECK_SECONDS", 0.0)


def test_a_session_ended_elsewhere_stops_waiting_without_its_json_being_read(
        tmp_path: Path) -> None:
    """The session's row says it ended; its JSON (here unreadable) is never needed for that."""
    path = tmp_path / "s.db"
    metrics = Metrics(model=describe_model(ScriptedModel([])), store=SQLiteStore(path))
    session_id = waiting_session(path, metrics, "Ana")
    assert waiting_gauge(metrics) == "miniagent_approvals_waiting 1.0"
    db = sqlite3.connect(path)
    db.execute("UPDATE sessions SET status = 'cancelled', data = '{damaged' WHERE id = ?",
               (session_id,))
    db.commit()
    db.close()
    assert waiting_gauge(metrics) == "miniagent_approvals_waiting 0.0"


def test_a_call_decided_elsewhere_while_another_still_waits_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    metrics = Metrics(model=describe_model(ScriptedModel([])), store=SQLiteStore(path))
    session_id = waiting_session(path, metrics, "Ana", "Bo")
    assert waiting_gauge(metrics) == "miniagent_approvals_waiting 2.0"
    assert waiting_gauge(metrics) == "miniagent_approvals_waiting 2.0"  # unchanged: as seen
    elsewhere = Agent(model=ScriptedModel([]), tools=[pay], store=SQLiteStore(path))
    elsewhere.approve(session_id, "c0")
    assert waiting_gauge(metrics) == "miniagent_approvals_waiting 1.0"
    elsewhere.deny(session_id, "c1")
    assert waiting_gauge(metrics) == "miniagent_approvals_waiting 0.0"

"""The shipped alerts, evaluated by promtool over the figures a real Metrics serves: an alert
fires while its cause lasts and stops when it is over (the figures held for 30 minutes)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from metric_tools import broken, weather
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from miniagent import Agent, Limits, ScriptedModel, tool
from miniagent.core.models.describe import describe_model
from miniagent.observe.metrics import ALERT_RULES, Metrics

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: Debian's prometheus package has it "
    "(bash scripts/deps/prometheus.sh; CI installs it)")


def fires(metrics: Metrics, alertname: str, tmp_path: Path) -> bool:
    """Whether promtool sees ``alertname`` firing 20 minutes into a scrape of ``metrics``
    whose figures stay as they are now."""
    text = generate_latest(metrics.registry).decode()
    series = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            series.append({"series": f"{sample.name}{{{labels}}}",
                           "values": f"{sample.value:g}+0x30"})
    test = {"rule_files": [str(ALERT_RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "20m", "alertname": alertname, "exp_alerts": []}]}]}
    (tmp_path / "test.yml").write_text(json.dumps(test))  # JSON is YAML
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(tmp_path / "test.yml")],
                          capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return False
    assert alertname in done.stdout + done.stderr, done.stdout + done.stderr  # no other fault
    return True


def act(name: str, **args: Any) -> str:
    return f"Thought: go\nAction: {name}\nAction Input: {json.dumps(args)}"


def run(metrics: Metrics, replies: list[str]) -> None:
    model = ScriptedModel([*replies, "Final Answer: done"])
    agent = Agent(model=model, tools=[weather, broken], limits=Limits(repeat_limit=10))
    agent.subscribe(metrics)
    assert agent.run("go").status == "completed"


def test_a_made_up_tool_name_does_not_fire_the_failing_tool_alert(tmp_path: Path) -> None:
    metrics = Metrics(model=describe_model(ScriptedModel([])))
    run(metrics, [act("made_up", n=n) for n in range(4)] + [act("weather", city="Oslo")])
    assert not fires(metrics, "MiniagentToolFailingRepeatedly", tmp_path)
    run(metrics, [act("broken", city=city) for city in ("Oslo", "Rome", "Lima")])
    assert fires(metrics, "MiniagentToolFailingRepeatedly", tmp_path)  # a real tool does


@tool(requires_approval=True)
def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


def waiting_session(store_path: Path, metrics: Metrics) -> str:
    from miniagent import SQLiteStore

    agent = Agent(model=ScriptedModel([act("pay", to="Ana")]), tools=[pay],
                  store=SQLiteStore(store_path))
    agent.subscribe(metrics)
    result = agent.run("pay Ana")
    assert result.status == "awaiting_approval"
    return result.session_id


def test_an_approval_decided_by_another_process_stops_waiting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions wait; another process (its own agent on the same file) approves and
    finishes one, denies the other: two hours later, the gauges read through the store count
    neither; a third, undecided, fires the alert."""
    import time
    import types
    import urllib.request

    from miniagent import SQLiteStore
    from miniagent.observe import metrics as metrics_module

    store = SQLiteStore(tmp_path / "s.db")
    metrics = Metrics(model=describe_model(ScriptedModel([])), store=store)
    decided, undecided = (waiting_session(tmp_path / "s.db", metrics) for _ in range(2))
    elsewhere = Agent(model=ScriptedModel(["Final Answer: paid"]), tools=[pay],
                      store=SQLiteStore(tmp_path / "s.db"))
    elsewhere.approve(decided)
    assert elsewhere.resume(decided).status == "completed"
    elsewhere.deny(undecided)  # decided, not yet resumed: no longer waiting either
    monkeypatch.setattr(metrics_module, "time", types.SimpleNamespace(
        time=lambda: time.time() + 7200, monotonic=time.monotonic))  # two hours later
    with metrics.serve("127.0.0.1:0") as server, \
            urllib.request.urlopen(server.url, timeout=10) as response:
        text = response.read().decode()
    assert "miniagent_approvals_waiting 0.0" in text
    assert "miniagent_approval_oldest_wait_seconds 0.0" in text
    assert not fires(metrics, "MiniagentApprovalWaitingLong", tmp_path)
    waiting_session(tmp_path / "s.db", metrics)  # one nobody decides
    assert fires(metrics, "MiniagentApprovalWaitingLong", tmp_path)

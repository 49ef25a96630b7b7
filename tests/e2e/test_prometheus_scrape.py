"""A real Prometheus server scrapes a running agent process and fires the failing-tool alert.

Prometheus (Debian's package) runs on a free 127.0.0.1 port with a temp config: a 1 s scrape
and rule evaluation interval, and a copy of the shipped alert rules whose ``for:`` is 1 s, so
that an alert fires within seconds. The agent process (``metrics_agent.py``) has run its
sessions before it serves: the figures it serves are final. The test polls Prometheus' HTTP
API with a bounded wait and never asserts a duration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from mcp_support import free_port

from miniagent.observe.metrics import ALERT_RULES

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is missing: Debian's prometheus package has it "
    "(bash scripts/deps/prometheus.sh; CI installs it)")
AGENT = Path(__file__).with_name("metrics_agent.py")
WAIT = 90.0
"""Seconds a figure or an alert may take to arrive (a bound, not an expectation)."""


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(20)


@pytest.fixture
def agent_process() -> Iterator[tuple[str, list[str]]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, str(AGENT)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        started = json.loads(process.stdout.readline() or "{}")
        assert "url" in started, f"the agent process exited with {process.poll()}"
        yield started["url"], started["statuses"]
    finally:
        if process.stdin is not None:
            process.stdin.close()  # it exits when its input closes
        try:
            process.wait(20)
        finally:
            stop(process)


@pytest.fixture
def prometheus(tmp_path: Path, agent_process: tuple[str, list[str]]) -> Iterator[str]:
    target = urllib.parse.urlsplit(agent_process[0]).netloc
    rules = tmp_path / "alerts.yml"
    rules.write_text(re.sub(r"(?m)^(\s+for:) \S+$", r"\1 1s", ALERT_RULES.read_text()))
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": "miniagent",
                            "static_configs": [{"targets": [target]}]}]}))
    port = free_port()
    process = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: process.poll() is None and get(f"{base}/-/ready") is not None,
              f"Prometheus never became ready (log: {tmp_path / 'prometheus.log'})")
        yield base
    finally:
        stop(process)


def get(url: str) -> Any:
    """The JSON (or, for a non-JSON answer, the text) at ``url``; None while unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
    except OSError:
        return None
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return body


def until(found: Callable[[], Any], failure: str) -> Any:
    """Poll ``found`` until it returns something true, for at most :data:`WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(failure)


def query(base: str, promql: str) -> float | None:
    """The value of a PromQL query that has one series, else None."""
    answer = get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    results = (answer or {}).get("data", {}).get("result", []) if isinstance(answer, dict) \
        else []
    return float(results[0]["value"][1]) if len(results) == 1 else None


def test_prometheus_scrapes_a_run_s_figures_and_fires_the_failing_tool_alert(
        prometheus: str, agent_process: tuple[str, list[str]]) -> None:
    assert agent_process[1] == ["completed", "completed"]
    # hand-computed: 2 runs, each calling 'broken' 3 times (its 2nd and 3rd calls retries)
    expected = {
        'miniagent_tool_calls_total{tool="broken",outcome="error"}': 6,
        'miniagent_tool_calls_total{tool="broken",outcome="retried"}': 4,
        'miniagent_tool_consecutive_failures{tool="broken"}': 6,
        'miniagent_runs_total{status="completed"}': 2,
        "miniagent_run_steps_sum": 8,
        'gen_ai_client_operation_duration_seconds_count{error_type=""}': 8,
    }
    until(lambda: query(prometheus, "up") == 1, "Prometheus never scraped the agent")
    for promql, value in expected.items():
        until(lambda p=promql: query(prometheus, p) is not None, f"{promql} never arrived")
        assert query(prometheus, promql) == value, promql

    def firing() -> list[dict[str, Any]]:
        answer = get(f"{prometheus}/api/v1/alerts") or {}
        alerts = answer.get("data", {}).get("alerts", []) if isinstance(answer, dict) else []
        return [a for a in alerts if a["labels"].get("alertname") ==
                "MiniagentToolFailingRepeatedly" and a["state"] == "firing"]

    alerts = until(firing, "MiniagentToolFailingRepeatedly never fired")
    assert [a["labels"]["tool"] for a in alerts] == ["broken"]
    assert alerts[0]["labels"]["job"] == "miniagent"
    assert "failed 6 times in a row" in alerts[0]["annotations"]["summary"]

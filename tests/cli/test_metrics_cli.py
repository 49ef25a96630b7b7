"""``--metrics HOST:PORT`` on run, chat, sessions resume and worker: served while the command
runs."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

pytest.importorskip("prometheus_client")

from miniagent import Agent, ScriptedModel
from miniagent.cli import app
from miniagent.cli.observing import observing
from miniagent.testing.stub_server import StubServer


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [["run"], ["chat"], ["sessions", "resume"], ["worker"]])
def test_the_option_is_offered(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "--metrics" in result.output


def test_the_endpoint_serves_while_observing_and_stops_after() -> None:
    agent = Agent(model=ScriptedModel(["Final Answer: 42"]))
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with observing(agent, trace=None, otlp=None, metrics=f"127.0.0.1:{port}"):
        agent.run("six times seven?")
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    assert 'miniagent_runs_total{status="completed"} 1.0' in text
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_run_serves_the_metrics_of_its_run(tmp_path: Path) -> None:
    port = free_port()
    seen: list[str] = []

    def answer(data: dict[str, object], n: int) -> str:
        # the stub answers in its own thread while the run waits: the endpoint is up
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            seen.append(r.read().decode())
        return "Final Answer: 42"

    with StubServer(answer).run_in_thread() as stub:
        result = invoke("run", "six times seven?", "--base-url", stub.base_url, "--model", "m",
                        "--mode", "react", "--json", "--store", str(tmp_path / "s.db"),
                        "--metrics", f"127.0.0.1:{port}")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "completed"
    assert "miniagent_run_steps_count 0.0" in seen[0]


def test_a_bad_address_is_one_line() -> None:
    result = invoke("run", "hi", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
                    "--metrics", "9464")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "HOST:PORT" in result.stderr.strip().splitlines()[-1]

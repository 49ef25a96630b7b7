"""Metrics over OTLP on Temporal, through the real CLI and a real dev server: `run --temporal
--otlp` counts the run from the workflow's events and names the model the worker used (a
Temporal client has no model of its own: it was once named ``NoneType``); `worker --otlp`
sends the model and tool calls it made when it stops."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from temporal_helpers import Processes
from temporalio.testing import WorkflowEnvironment

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
sys.path.insert(0, str(Path(__file__).parents[1] / "observe"))  # the OTLP receiver's folder

from otlp_receiver import otlp_receiver

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_run_and_worker_send_metrics_naming_the_workers_model(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    with otlp_receiver() as receiver:
        worker = procs.worker(task_queue, "react", "--otlp", receiver.url)
        ran = procs.cli("run", "fetch it", "--task-queue", task_queue, "--json",
                        "--otlp", receiver.url)
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)["status"] == "completed"
        client = list(receiver.points)  # the CLI has exited: its figures have arrived
        worker.send_signal(signal.SIGINT)  # a worker sends what is left when it stops
        worker.wait(timeout=60)

    assert not any("NoneType" in str(p.attributes) for p in receiver.points)
    chats = receiver.named("chat")  # the client's spans: named for a model it does not know
    assert [(s.name, s.attributes.get("gen_ai.response.model")) for s in chats] == [
        ("chat", "stub"), ("chat", "stub")]
    assert not any("NoneType" in f"{s.name} {s.attributes}" for s in receiver.spans)
    runs = [p for p in client if p.name == "miniagent.runs"]
    assert [(p.attributes, p.value) for p in runs] == [
        ({"miniagent.run.status": "completed"}, 1)]
    durations = [p for p in client if p.name == "gen_ai.client.operation.duration"]
    assert [(p.attributes.get("gen_ai.request.model"), p.count) for p in durations] == [
        ("stub", 2)]  # the name the worker's server answered with, carried by the events
    steps, = [p for p in client if p.name == "miniagent.run.steps"]
    assert (steps.count, steps.sum) == (1, 2)

    worked = receiver.points[len(client):]
    calls = [(p.attributes, p.value) for p in worked if p.name == "miniagent.tool.calls"]
    assert calls == [({"gen_ai.tool.name": "slow_fetch",
                       "miniagent.tool.outcome": "ok"}, 1)]
    durations = [p for p in worked if p.name == "gen_ai.client.operation.duration"]
    assert [(p.attributes["gen_ai.request.model"], p.count) for p in durations] == [("stub", 2)]
    runs = [p for p in worked if p.name == "miniagent.runs"]  # the workflow ran on it
    assert [(p.attributes, p.value) for p in runs] == [({"miniagent.run.status": "completed"}, 1)]

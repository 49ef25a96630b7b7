"""Temporal as a user meets it, through the real CLI and a real dev server: the same JSON as the
SQLite path, status and transitions that agree everywhere, a cancel that cancels (with or
without a worker), payloads that stay readable JSON, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from temporal_helpers import Processes, wait_status
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, ScriptedModel, tool
from miniagent.core.errors import ConfigError
from miniagent.temporal import TemporalAgent, TemporalSessions, agent_worker
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


def sqlite_json(stub: StubServer, tmp_path: Path) -> dict[str, object]:
    """What `run --detach --json` prints for the same question in process (SQLite)."""
    import subprocess

    from temporal_helpers import TOOLS

    ran = subprocess.run(
        [sys.executable, "-m", "miniagent", "run", "transfer money", "--base-url",
         stub.base_url, "--mode", "react", "--tools", TOOLS, "--store",
         str(tmp_path / "s.db"), "--detach", "--json"],
        capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "DURABLE_LOG": str(tmp_path / "l"),
             "DURABLE_MARKS": str(tmp_path)})
    assert ran.returncode == 3, ran.stderr
    data: dict[str, object] = json.loads(ran.stdout)
    return data


async def test_detach_json_is_the_sqlite_object_and_every_reader_agrees(
        dev_env: WorkflowEnvironment, procs: Processes, stub: StubServer, task_queue: str,
        tmp_path: Path) -> None:
    procs.worker(task_queue)
    ran = procs.cli("run", "transfer money", "--task-queue", task_queue, "--detach", "--json")
    assert ran.returncode == 3, ran.stderr
    remote = json.loads(ran.stdout)
    local = sqlite_json(stub, tmp_path)
    assert sorted(remote) == sorted(local)
    assert remote["status"] == local["status"] == "awaiting_approval"
    (pending,) = remote["pending_approvals"]  # type: ignore[misc]
    assert pending["tool"] == "transfer" and pending["arguments"] == {"amount": 100}
    session_id = remote["session_id"]
    shown = procs.cli("sessions", "show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    session = json.loads(shown.stdout)
    assert session["status"] == "awaiting_approval"
    assert session["reason"].startswith("waiting for approval of transfer")
    assert [(t["source"], t["target"]) for t in session["transitions"]] == [
        ("running", "awaiting_approval")]
    listed = json.loads(procs.cli("sessions", "list", "--json").stdout)
    assert [r["status"] for r in listed if r["session_id"] == session_id] == [
        "awaiting_approval"]
    approved = procs.cli("sessions", "approve", session_id)
    assert approved.returncode == 0, approved.stderr
    followed = procs.cli("sessions", "resume", session_id, "--task-queue", task_queue,
                         "--json")
    assert followed.returncode == 0, followed.stderr
    assert json.loads(followed.stdout)["final_answer"] == "done"
    sessions = TemporalSessions(dev_env.client, task_queue)
    assert [r["status"] for r in await sessions.list(50) if r["session_id"] == session_id] == [
        "completed"]


async def test_cancel_is_a_temporal_cancellation(dev_env: WorkflowEnvironment,
                                                 procs: Processes, task_queue: str) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    await wait_status(sessions, session_id, "awaiting_approval")
    cancelled = procs.cli("sessions", "cancel", session_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled session" in cancelled.stdout
    result = await sessions.result(session_id)
    assert result.status == "cancelled"
    described = await dev_env.client.get_workflow_handle(session_id).describe()
    assert described.status == WorkflowExecutionStatus.CANCELED
    session = await sessions.session(session_id)  # the workflow recorded why
    assert [t.target for t in session.transitions][-1] == "cancelled"
    assert procs.log_lines() == []  # the transfer never ran


async def test_cancel_with_no_worker_ends_the_session(dev_env: WorkflowEnvironment,
                                                      procs: Processes, task_queue: str) -> None:
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")  # nobody serves this task queue
    cancelled = procs.cli("sessions", "cancel", session_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "no worker polls its task queue" in cancelled.stdout
    assert (await sessions.result(session_id)).status == "cancelled"
    assert [r["status"] for r in await sessions.list(50) if r["session_id"] == session_id] == [
        "cancelled"]


async def test_no_worker_is_one_clear_error(dev_env: WorkflowEnvironment,
                                            procs: Processes) -> None:
    ran = procs.cli("run", "transfer money", "--task-queue", "nobody-serves-this")
    assert ran.returncode != 0
    assert "no worker polls task queue 'nobody-serves-this'" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text * 40  # a few kilobytes of observation


async def test_payloads_stay_readable_json(dev_env: WorkflowEnvironment, task_queue: str) -> None:
    script = [{"content": None, "tool_calls": [
        {"id": "e1", "name": "echo", "arguments": {"text": "readable 文本 "}}]},
        {"content": "echoed"}]
    agent = TemporalAgent(Agent(model=ScriptedModel(script, tool_mode="native"), tools=[echo]),
                          dev_env.client, task_queue=task_queue)
    async with await agent_worker(agent):
        result = await agent.arun("echo a lot")
    assert result.status == "completed"
    history = await dev_env.client.get_workflow_handle(result.session_id).fetch_history()
    payloads = [p for event in history.events
                for p in event.activity_task_scheduled_event_attributes.input.payloads]
    assert len(payloads) == 3  # two model calls, one tool call
    for payload in payloads:
        assert payload.metadata["encoding"] == b"json/plain"
        json.loads(payload.data)
    assert "readable 文本" in payloads[-1].data.decode("utf-8")


async def test_arun_without_a_worker_says_so(dev_env: WorkflowEnvironment) -> None:
    agent = TemporalAgent(Agent(model=ScriptedModel(["Final Answer: x"])), dev_env.client,
                          task_queue="nobody-at-all")
    with pytest.raises(ConfigError, match="no worker polls task queue 'nobody-at-all'"):
        await agent.arun("hello")

"""Approvals from another process: the real CLI sends the update; a denied call never runs."""

from __future__ import annotations

import pytest
from temporal_helpers import Processes, wait_status
from temporalio.testing import WorkflowEnvironment

from miniagent.temporal import TemporalSessions

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_cli_approval_from_another_process_resumes(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    view = await wait_status(sessions, session_id, "awaiting_approval")
    [pending] = view.pending
    assert (pending.tool, pending.arguments) == ("transfer", {"amount": 100})

    listed = procs.cli("sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert session_id in listed.stdout and "awaiting_approval" in listed.stdout
    unknown = procs.cli("sessions", "approve", session_id, "no-such-call")
    assert unknown.returncode == 2 and "no call 'no-such-call'" in unknown.stderr
    approved = procs.cli("sessions", "approve", session_id, pending.call_id)
    assert approved.returncode == 0, approved.stderr
    assert f"approved {pending.call_id}" in approved.stdout

    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "done")
    assert [line.split(" key=")[0] for line in procs.log_lines()] == ["transfer 100"]
    again = procs.cli("sessions", "approve", session_id, pending.call_id)
    assert again.returncode == 2 and "not awaiting approval" in again.stderr
    shown = procs.cli("sessions", "show", session_id)
    assert shown.returncode == 0 and "transferred 100" in shown.stdout


async def test_denied_call_never_runs(dev_env: WorkflowEnvironment, procs: Processes,
                                      task_queue: str) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    await wait_status(sessions, session_id, "awaiting_approval")
    denied = procs.cli("sessions", "deny", session_id, "--reason", "not today")
    assert denied.returncode == 0, denied.stderr
    result = await sessions.result(session_id)
    assert result.status == "completed"
    record = result.steps[0].calls[0]
    assert record.state == "completed" and record.observation is not None
    assert "denied" in record.observation.output and "not today" in record.observation.output
    assert procs.log_lines() == []  # the tool never ran


async def test_signal_sent_before_the_wait_is_used(dev_env: WorkflowEnvironment,
                                                   procs: Processes, task_queue: str) -> None:
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer natively")
    # no worker yet: the decision arrives before the call exists (the model names it pay-1)
    await sessions.signal_decision(session_id, True, call_id="pay-1")
    procs.worker(task_queue, mode="native")
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "done natively")
    assert [line.split(" key=")[0] for line in procs.log_lines()] == ["transfer 7"]


async def test_cli_run_follows_and_cancel_ends_the_session(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    procs.worker(task_queue)
    ran = procs.cli("run", "transfer money", "--task-queue", task_queue, "--detach")
    assert ran.returncode == 3, ran.stderr
    # the same live trace and the same hints as a run in process (one renderer)
    assert "Action: transfer" in ran.stdout and "is awaiting approval" in ran.stdout
    assert "--temporal" in ran.stdout.split("is awaiting approval")[1]
    sessions = TemporalSessions(dev_env.client, task_queue)
    [row] = [r for r in await sessions.list(10) if r["question"] == "transfer money"
             and r["status"] == "awaiting_approval"][:1]
    cancelled = procs.cli("sessions", "cancel", row["session_id"])
    assert cancelled.returncode == 0, cancelled.stderr
    result = await sessions.result(row["session_id"])
    assert result.status == "cancelled"
    assert procs.log_lines() == []

"""A fork on Temporal: the parent read through its workflow, the fork a workflow of its own
(with the parent's spec), decided and finished there while the parent waits on."""

from __future__ import annotations

import json

import pytest
from temporal_helpers import Processes, wait_status
from temporalio.testing import WorkflowEnvironment

from miniagent.core.runtime.run import AgentSpec
from miniagent.temporal import TemporalSessions
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_fork_of_a_waiting_session_waits_and_runs_in_its_own_workflow(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str,
        stub: StubServer) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    spec = AgentSpec(instructions="Fork test: be exact.")
    parent = await sessions.start("transfer money", spec)
    await wait_status(sessions, parent, "awaiting_approval")

    bad = procs.cli("sessions", "fork", parent, "--at", "5", "--task-queue", task_queue)
    assert bad.returncode == 2 and "fork it at a step from 0 to 1, not 5" in bad.stderr
    forked = procs.cli("sessions", "fork", parent, "--at", "1", "--task-queue", task_queue,
                       "--json")
    assert forked.returncode == 0, forked.stderr
    said = json.loads(forked.stdout)
    child = said["session_id"]
    assert said["forked_from"] == {"session_id": parent, "step": 1} and child != parent
    [pending] = (await wait_status(sessions, child, "awaiting_approval")).pending
    assert (pending.tool, pending.arguments) == ("transfer", {"amount": 100})

    approved = procs.cli("sessions", "approve", child)
    assert approved.returncode == 0, approved.stderr
    result = await sessions.result(child)
    assert (result.status, result.final_answer) == ("completed", "done")
    assert [line.split(" key=")[0] for line in procs.log_lines()] == ["transfer 100"]
    assert "Fork test: be exact." in stub.requests[-1]["messages"][0]["content"]
    view = await sessions.view(parent)  # the parent waits on, undecided
    assert (view.status, [p.call_id for p in view.pending]) == (
        "awaiting_approval", [pending.call_id])
    assert (await sessions.session(child)).forked_from.step == 1  # type: ignore[union-attr]
    await sessions.cancel(parent)

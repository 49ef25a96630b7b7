"""Approval with edits on Temporal: the decision update carries the person's arguments, the
workflow checks them against the call's recorded schema (a refused update decides nothing),
and the worker runs the call with them."""

from __future__ import annotations

import pytest
from temporal_helpers import Processes, wait_status
from temporalio.testing import WorkflowEnvironment

from miniagent.core.errors import DecisionError
from miniagent.temporal import TemporalSessions

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_cli_approval_with_edits_is_checked_by_the_workflow_then_run(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    view = await wait_status(sessions, session_id, "awaiting_approval")
    [pending] = view.pending
    assert (pending.tool, pending.arguments) == ("transfer", {"amount": 100})

    refused = procs.cli("sessions", "approve", session_id, "--call", pending.call_id,
                        "--arguments", '{"amount": "a lot"}')
    assert refused.returncode == 2, refused.stderr
    assert "amount: 'a lot' is not of type 'integer'" in refused.stderr
    assert "nothing was decided" in refused.stderr
    with pytest.raises(DecisionError, match="Additional properties are not allowed"):
        await sessions.decide(session_id, True, pending.call_id,
                              arguments={"amount": 5, "memo": "x"})
    still = await sessions.view(session_id)
    assert [p.call_id for p in still.pending] == [pending.call_id]  # nothing decided

    approved = procs.cli("sessions", "approve", session_id, "--call", pending.call_id,
                         "--arguments", '{"amount": 5}', "--reason", "5 is enough")
    assert approved.returncode == 0, approved.stderr
    assert f"approved {pending.call_id} with your arguments" in approved.stdout
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "done")
    assert [line.split(" key=")[0] for line in procs.log_lines()] == ["transfer 5"]
    (record,) = result.steps[0].calls
    assert (record.call.arguments, record.edited_arguments) == ({"amount": 100}, {"amount": 5})
    assert record.observation is not None
    note, output = record.observation.output.split("\n")
    assert "changed arguments" in note and output == "transferred 5"


async def test_an_edit_signalled_before_the_wait_is_checked_when_the_call_waits(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer natively")
    # no worker yet: the decision arrives before the call exists (the model names it pay-1)
    await sessions.signal_decision(session_id, True, call_id="pay-1",
                                   arguments={"amount": 2})
    procs.worker(task_queue, mode="native")
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "done natively")
    assert [line.split(" key=")[0] for line in procs.log_lines()] == ["transfer 2"]
    assert result.steps[0].calls[0].edited_arguments == {"amount": 2}

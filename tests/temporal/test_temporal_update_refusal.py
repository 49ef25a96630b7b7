"""A decision the workflow refuses, on a real dev server: a non-retryable application error
whose message is the reason, and one line of that reason from the CLI."""

from __future__ import annotations

import pytest
from temporal_helpers import Processes, wait_status
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from miniagent.temporal import TemporalSessions
from miniagent.temporal.contracts import DecisionInput
from miniagent.temporal.workflow import SessionWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_refused_decision_says_the_reason_only(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    procs.worker(task_queue)
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    view = await wait_status(sessions, session_id, "awaiting_approval")
    [pending] = view.pending
    reason = (f"session {session_id} has no call 'no-such-call' awaiting approval "
              f"(waiting: {pending.call_id})")

    handle = dev_env.client.get_workflow_handle(session_id)
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await handle.execute_update(SessionWorkflow.decide,
                                    DecisionInput(approved=True, call_id="no-such-call"))
    refusal = caught.value.cause
    assert isinstance(refusal, ApplicationError)
    assert (refusal.message, refusal.type, refusal.non_retryable) == (
        reason, "DecisionRefused", True)
    # the same refusal of a signal, which has no caller to tell, is logged and dropped
    await sessions.signal_decision(session_id, True, "no-such-call")

    unknown = procs.cli("sessions", "approve", session_id, "no-such-call")
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == f"miniagent: {reason}\n"
    approved = procs.cli("sessions", "approve", session_id, pending.call_id)  # still waiting
    assert approved.returncode == 0, approved.stderr
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "done")

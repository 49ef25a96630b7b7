"""A worker's limits, through the real CLI and a real dev server: the worker takes Temporal's
activity limits and the model endpoint's, and serves sessions under them."""

from __future__ import annotations

import json

import pytest
from temporal_helpers import Processes
from temporalio.testing import WorkflowEnvironment

from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_worker_with_limits_serves_sessions_under_them(
        dev_env: WorkflowEnvironment, procs: Processes, stub: StubServer,
        task_queue: str) -> None:
    worker = procs.worker(task_queue, "react", "--max-concurrent-activities", "1",
                          "--task-queue-activities-per-second", "50",
                          "--model-concurrency", "1", "--requests-per-minute", "600")
    ran = procs.cli("run", "fetch it", "--task-queue", task_queue, "--json")
    assert ran.returncode == 0, (ran.stderr, worker.poll())
    result = json.loads(ran.stdout)
    assert (result["status"], result["final_answer"]) == ("completed", "fetched")
    assert result["trace"][0]["observations"][0]["output"] == "fetched k"


async def test_a_slot_waiting_signal_reaches_the_call_bounded_and_storable() -> None:
    # Anyone who may signal the workflow may send this signal: what reaches the event log
    # (and the queries that page through it) is bounded, and text any store can keep.
    from types import SimpleNamespace

    from miniagent.temporal.contracts import SlotWait
    from miniagent.temporal.workflow import SessionWorkflow

    reported: list[tuple[str, str]] = []
    flow = SimpleNamespace(waits={"step1-c1": lambda what, why: reported.append((what, why))})
    huge = SlotWait(key="step1-c1", what="tool " + "x" * 1_000_000, reason="\ud800" + "y" * 5000)
    SessionWorkflow.slot_waiting(flow, huge)  # type: ignore[arg-type]
    SessionWorkflow.slot_waiting(flow, SlotWait(key="step9-gone", what="tool t", reason="r"))
    [(what, reason)] = reported
    assert what.startswith("tool xxx") and len(what) <= 300 and len(reason) <= 300
    what.encode(), reason.encode()  # no lone surrogate left

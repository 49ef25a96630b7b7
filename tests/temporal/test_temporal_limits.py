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

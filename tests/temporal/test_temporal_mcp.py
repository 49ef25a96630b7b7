"""A worker serves an MCP server's tools: `miniagent worker --mcp`, a real mcp-server-time."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_helpers import Processes, address, answer
from temporalio.testing import WorkflowEnvironment

from miniagent.temporal import TemporalSessions
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.asyncio(loop_scope="session")
pytest.importorskip("mcp_server_time")


@pytest.fixture
def procs(tmp_path: Path, dev_env: WorkflowEnvironment) -> Iterator[tuple[Processes, StubServer]]:
    with StubServer(answer).run_in_thread() as stub:
        processes = Processes(tmp_path, stub.base_url, address(dev_env))
        try:
            yield processes, stub
        finally:
            processes.stop()


async def test_a_worker_runs_mcp_tools_as_activities(
        dev_env: WorkflowEnvironment, procs: tuple[Processes, StubServer],
        task_queue: str) -> None:
    processes, stub = procs
    processes.worker(task_queue, "react", "--mcp", f"{sys.executable} -m mcp_server_time")
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("time in Tokyo")
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "it is late in Tokyo")
    [record] = result.steps[0].calls
    assert record.observation is not None and not record.observation.is_error
    assert "Asia/Tokyo" in record.observation.output  # the real server's answer
    # the model was offered the server's tool, and saw what it returned
    offered = str(stub.requests[0])
    assert "get_current_time" in offered
    assert "Asia/Tokyo" in str(stub.requests[-1]["messages"][-1]["content"])

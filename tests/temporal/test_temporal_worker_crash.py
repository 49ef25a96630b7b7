"""A worker SIGKILLed mid-tool: another worker takes over. The interrupted call runs again
only if its tool is idempotent (same idempotency key, next attempt); otherwise the session
waits for a person, as it does in process."""

from __future__ import annotations

import signal

import pytest
from temporal_helpers import Processes, wait_status
from temporalio.testing import WorkflowEnvironment

from miniagent.core.session import INTERRUPTED_NOTE
from miniagent.temporal import TemporalOptions, TemporalSessions

pytestmark = pytest.mark.asyncio(loop_scope="session")
OPTIONS = TemporalOptions(heartbeat_timeout=2.0)


def parts(line: str) -> tuple[str, str, str]:
    what, rest = line.split(" key=")
    key, attempt = rest.split(" attempt=")
    return what, key, attempt


async def test_idempotent_tool_reruns_on_another_worker(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    first = procs.worker(task_queue, DURABLE_SLOW="60")
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("fetch it", options=OPTIONS)
    await procs.wait_for_mark("slow_fetch")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    procs.worker(task_queue, DURABLE_SLOW="0")
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "fetched")
    runs = [parts(line) for line in procs.log_lines()]
    assert [(what, attempt) for what, _, attempt in runs] == [
        ("started slow_fetch", "1"), ("started slow_fetch", "2")]
    assert runs[0][1] == runs[1][1] and runs[0][1].startswith(f"{session_id}:")


async def test_non_idempotent_tool_waits_for_a_person(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    first = procs.worker(task_queue, DURABLE_SLOW="60")
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("append it", options=OPTIONS)
    await procs.wait_for_mark("slow_append")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    procs.worker(task_queue, DURABLE_SLOW="0")
    view = await wait_status(sessions, session_id, "awaiting_approval")
    [pending] = view.pending
    assert pending.tool == "slow_append" and pending.reason == INTERRUPTED_NOTE
    assert [parts(line)[0] for line in procs.log_lines()] == ["started slow_append"]
    approved = procs.cli("sessions", "approve", session_id)
    assert approved.returncode == 0, approved.stderr
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "appended")
    assert [parts(line)[0] for line in procs.log_lines()] == [
        "started slow_append", "started slow_append", "append two"]
    record = result.steps[0].calls[0]
    assert record.interrupted and record.observation is not None
    assert record.observation.output == "appended"

"""`miniagent worker` stops soon after SIGINT (exit 130, no traceback) when it cannot finish
its shutdown at once: a sync tool's thread still runs (the cluster hands the call to another
worker, which finishes the session), or its server does not answer the last goodbye (a
cluster under load; here a dev server of the test's own, paused with SIGSTOP). Real worker
processes; every wait is bounded."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_helpers import Processes
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from miniagent.temporal import TemporalOptions, TemporalSessions
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT, SIGSTOP")
OPTIONS = TemporalOptions(heartbeat_timeout=2.0)
STOP_WAIT = 20.0
"""Seconds a worker gets to exit after SIGINT: several times its bounded shutdown."""


def interrupted(worker: subprocess.Popen[str]) -> tuple[int | None, str]:
    """SIGINT ``worker``: its exit code (None: still running after STOP_WAIT, then killed)
    and its stderr."""
    worker.send_signal(signal.SIGINT)
    try:
        code: int | None = worker.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        code = None
        worker.kill()
        worker.wait(timeout=30)
    assert worker.stderr is not None
    return code, worker.stderr.read()


def serving(worker: subprocess.Popen[str]) -> None:
    """Wait (bounded by the test's timeout) until ``worker`` says it polls."""
    assert worker.stderr is not None
    for line in worker.stderr:
        if "serving task queue" in line:
            return
    raise AssertionError(f"the worker ended before serving (exit {worker.wait(timeout=30)})")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_worker_stops_on_sigint_while_a_sync_tool_runs(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    first = procs.worker(task_queue, DURABLE_SLOW="600")
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("fetch it", options=OPTIONS)
    await procs.wait_for_mark("slow_fetch")
    code, stderr = interrupted(first)
    assert (code, "Traceback" in stderr) == (130, False), stderr
    procs.worker(task_queue, DURABLE_SLOW="0")  # the interrupted call runs again there
    result = await sessions.result(session_id)
    assert (result.status, result.final_answer) == ("completed", "fetched")


@pytest.fixture
def own_server() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A dev server of this test's own (the test pauses it), and its address once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(Path(sysconfig.get_path("scripts")) / "temporal"), "server", "start-dev",
         "--ip", "127.0.0.1", "--port", str(port), "--headless", "--log-level", "error"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        target = f"127.0.0.1:{port}"
        asyncio.run(_answering(target))
        yield server, target
    finally:
        server.send_signal(signal.SIGCONT)
        server.kill()
        server.wait(timeout=30)


async def _answering(target: str) -> None:
    for _ in range(300):
        try:
            await Client.connect(target)
            return
        except RuntimeError:  # not listening yet
            await asyncio.sleep(0.1)
    raise AssertionError(f"the dev server at {target} never answered")


def test_a_worker_stops_on_sigint_though_its_server_no_longer_answers(
        own_server: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    server, target = own_server
    with StubServer(["Thought: t\nAction: slow_fetch\nAction Input: {\"key\": \"k\"}",
                     "Final Answer: fetched"]).run_in_thread() as stub:
        procs = Processes(tmp_path, stub.base_url, target)
        try:
            worker = procs.worker("stop-q")
            serving(worker)
            ran = procs.cli("run", "fetch it", "--task-queue", "stop-q", "--json")
            assert ran.returncode == 0, ran.stderr  # the worker served a session: it polls
            server.send_signal(signal.SIGSTOP)  # the cluster stops answering
            code, stderr = interrupted(worker)
        finally:
            procs.stop()
    assert (code, "Traceback" in stderr) == (130, False), stderr

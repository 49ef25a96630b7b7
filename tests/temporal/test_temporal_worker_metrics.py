"""A worker's metrics: its activities count each model call attempt and each tool call; the
workflows it runs count their runs and approvals (the series the runs and approvals alerts
read)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytest.importorskip("prometheus_client")

import asyncio
import socket
import urllib.request

from temporal_helpers import Processes, wait_status
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from miniagent import ScriptedModel, tool
from miniagent.core.errors import ModelHTTPError
from miniagent.core.models.describe import describe_model
from miniagent.core.tools.toolbox import Toolbox, ToolRegistry
from miniagent.core.types import ModelRequest, ToolCall
from miniagent.observe.metrics import Metrics
from miniagent.temporal import TemporalSessions
from miniagent.temporal.activities import SessionActivities
from miniagent.temporal.contracts import ToolInput


@tool
def broken(city: str) -> str:
    """A tool that always fails."""
    raise RuntimeError("down")


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_the_worker_counts_model_calls_and_tool_calls() -> None:
    model = ScriptedModel([
        {"choices": [{"message": {"content": "Final Answer: 1"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 7, "completion_tokens": 2}},
        ModelHTTPError("POST http://m/v1/chat/completions answered 503: busy", status=503)])
    metrics = Metrics(model=describe_model(model))
    registry = ToolRegistry()
    registry.register(broken)
    activities = SessionActivities(model, await Toolbox.gather([registry]), metrics=metrics)
    env = ActivityEnvironment()
    request = ModelRequest(messages=[{"role": "user", "content": "q"}])
    await env.run(activities.generate, request)
    with pytest.raises(ApplicationError):
        await env.run(activities.generate, request)
    call = ToolCall(id="c1", name="broken", arguments={"city": "x"})
    for n in range(2):
        await env.run(activities.run_tool, ToolInput(call=call, session_id="s", step=n + 1))

    chat = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "miniagent",
            "gen_ai_request_model": "ScriptedModel"}
    duration = "gen_ai_client_operation_duration_seconds_count"
    assert sample(metrics, duration, **chat, error_type="") == 1
    assert sample(metrics, duration, **chat, error_type="ModelHTTPError") == 1
    assert sample(metrics, "gen_ai_client_token_usage_sum", **chat,
                  gen_ai_token_type="input") == 7
    assert sample(metrics, "miniagent_model_errors_total", error_type="ModelHTTPError",
                  status_code="503") == 1
    assert sample(metrics, "miniagent_tool_calls_total", tool="broken", outcome="error") == 2
    assert sample(metrics, "miniagent_tool_calls_total", tool="broken", outcome="retried") == 1
    assert sample(metrics, "miniagent_tool_consecutive_failures", tool="broken") == 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    """The worker's samples by ``name{labels}``; empty while it does not serve yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    return {f"{s.name}{dict(sorted(s.labels.items()))}": s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def scraped(port: int, name: str, value: float) -> None:
    """Wait (a bounded 60 s) until the worker serves ``name`` (with its labels) at ``value``."""
    for _ in range(240):
        if scrape(port).get(name) == value:
            return
        await asyncio.sleep(0.25)
    shown = {k: v for k, v in scrape(port).items() if k.startswith("miniagent_")
             and "_bucket" not in k and "_created" not in k}
    raise AssertionError(f"{name} never reached {value}: {shown}")


@pytest.mark.asyncio(loop_scope="session")
async def test_the_worker_serves_the_runs_and_approvals_of_its_workflows(
        dev_env: WorkflowEnvironment, procs: Processes, task_queue: str) -> None:
    port = free_port()
    procs.worker(task_queue, "react", "--metrics", f"127.0.0.1:{port}")
    sessions = TemporalSessions(dev_env.client, task_queue)
    session_id = await sessions.start("transfer money")
    await wait_status(sessions, session_id, "awaiting_approval")
    await scraped(port, "miniagent_approvals_waiting{}", 1)
    assert scrape(port)["miniagent_approval_oldest_wait_seconds{}"] >= 0
    approved = procs.cli("sessions", "approve", session_id)
    assert approved.returncode == 0, approved.stderr
    assert (await sessions.result(session_id)).status == "completed"
    await scraped(port, "miniagent_runs_total{'status': 'completed'}", 1)
    samples = scrape(port)
    assert samples["miniagent_approvals_waiting{}"] == 0
    assert samples["miniagent_run_steps_count{}"] == 1
    assert samples["miniagent_tool_calls_total{'outcome': 'ok', 'tool': 'transfer'}"] == 1

"""A worker's metrics: its activities count each model call attempt and each tool call."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client")

from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from miniagent import ScriptedModel, tool
from miniagent.errors import ModelHTTPError
from miniagent.observe.describe import describe_model
from miniagent.observe.metrics import Metrics
from miniagent.temporal.activities import SessionActivities
from miniagent.temporal.contracts import ToolInput
from miniagent.tools.registry import ToolRegistry
from miniagent.tools.toolbox import Toolbox
from miniagent.types import ModelRequest, ToolCall


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

"""Prometheus metrics of scripted runs, read from the real /metrics endpoint over HTTP."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from metric_tools import broken, weather
from prometheus_client.parser import text_string_to_metric_families

from docs_pages import block_with
from miniagent import Agent, ScriptedModel, tool
from miniagent.core.errors import ConfigError, ModelHTTPError
from miniagent.core.models.describe import describe_model
from miniagent.core.runtime import events as ev
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.core.types import Observation, ToolCall
from miniagent.observe.metrics import MAX_TOOLS, UNKNOWN_TOOL, Metrics
from miniagent.observe.metrics_http import parse_address, serve_metrics


@tool(timeout=0.05)
async def slow(city: str) -> str:
    """A tool that never answers in time."""
    await asyncio.sleep(5)
    return "late"


@tool(requires_approval=True)
def delete_file(name: str) -> str:
    """Delete a file."""
    return f"deleted {name}"


def act(tool_name: str, /, **args: Any) -> dict[str, Any]:
    return reply(f"Thought: go\nAction: {tool_name}\nAction Input: {json.dumps(args)}")


def reply(text: str) -> dict[str, Any]:
    """A reply whose server reported 10 prompt and 4 completion tokens."""
    return {"choices": [{"index": 0, "message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4}}


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the endpoint, by name and labels."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_a_scripted_run_s_metrics_equal_the_hand_computed_ones(tmp_path: Any) -> None:
    model = ScriptedModel([
        act("broken", city="a"),           # step 1: error
        act("broken", city="b"),           # step 2: retried, error
        act("slow", city="c"),             # step 3: timeout
        reply("I am not sure what to do"),  # step 4: neither action nor answer
        act("weather", city="d"),          # step 5: a self-repair; ok
        reply("Final Answer: sunny"),      # step 6
        act("delete_file", name="x"),      # second run: waits for a person
        reply("Final Answer: not deleted"),
        ModelHTTPError("POST http://m/v1/chat/completions answered 429: slow down",
                       status=429),        # third run: the model fails
    ])
    agent = Agent(model=model, tools=[weather, broken, slow, delete_file],
                  store=SQLiteStore(tmp_path / "s.db"))
    metrics = Metrics(model=describe_model(model))
    agent.subscribe(metrics)
    with metrics.serve("127.0.0.1:0") as server:
        first = agent.run("weather?")
        second = agent.run("delete x")
        waiting = scrape(server.url)
        agent.deny(second.session_id, reason="no")
        resumed = agent.resume(second.session_id)
        third = agent.run("again")
        samples = scrape(server.url)

    assert (first.status, second.status, resumed.status, third.status) == (
        "completed", "awaiting_approval", "completed", "error")
    assert value(waiting, "miniagent_approvals_waiting") == 1
    assert value(samples, "miniagent_approvals_waiting") == 0
    assert value(samples, "miniagent_approval_oldest_wait_seconds") == 0
    runs = "miniagent_runs_total"
    assert value(samples, runs) == 4
    assert value(samples, runs, status="completed") == 2
    assert value(samples, runs, status="awaiting_approval") == 1
    assert value(samples, runs, status="error") == 1
    # steps: 6 in the first run; 1 before the wait, and the turn's 2 when the resumed run
    # ends; 1 whose model call failed
    assert value(samples, "miniagent_run_steps_count") == 4
    assert value(samples, "miniagent_run_steps_sum") == 6 + 1 + 2 + 1
    calls = "miniagent_tool_calls_total"
    assert value(samples, calls, tool="broken", outcome="error") == 2
    assert value(samples, calls, tool="broken", outcome="retried") == 1
    assert value(samples, calls, tool="slow", outcome="timeout") == 1
    assert value(samples, calls, tool="weather", outcome="ok") == 1
    assert value(samples, calls, tool="delete_file", outcome="denied") == 1
    assert value(samples, calls) == 6
    assert value(samples, "miniagent_tool_duration_seconds_count") == 4  # the calls that ran
    assert value(samples, "miniagent_tool_consecutive_failures", tool="broken") == 2
    assert value(samples, "miniagent_tool_consecutive_failures", tool="weather") == 0
    assert value(samples, "miniagent_parse_failures_total") == 1
    assert value(samples, "miniagent_self_repairs_total") == 1
    assert value(samples, "miniagent_guard_interventions_total", guard="format_error") == 1
    assert value(samples, "miniagent_model_errors_total", error_type="ModelHTTPError",
                 status_code="429") == 1
    duration = "gen_ai_client_operation_duration_seconds_count"
    chat = {"gen_ai_operation_name": "chat", "gen_ai_request_model": "ScriptedModel"}
    assert value(samples, duration, **chat, error_type="") == 8
    assert value(samples, duration, **chat, error_type="ModelHTTPError") == 1
    tokens = "gen_ai_client_token_usage"
    assert value(samples, f"{tokens}_count", gen_ai_token_type="input") == 8
    assert value(samples, f"{tokens}_sum", gen_ai_token_type="input") == 8 * 10
    assert value(samples, f"{tokens}_sum", gen_ai_token_type="output") == 8 * 4
    labels = {name for (_, ls) in samples for name, _ in ls}
    assert not labels & {"session_id", "gen_ai_conversation_id", "call_id", "city"}


def test_a_waiting_approval_is_counted_with_its_age() -> None:
    metrics = Metrics(model=describe_model(ScriptedModel([])))
    from miniagent.core.types import PendingApproval

    metrics(ev.ApprovalRequested(session_id="s", span_id="1", at=1.0, pending=[
        PendingApproval(call_id="c", tool="delete_file", arguments={})]))
    with serve_metrics("127.0.0.1:0", metrics.registry) as server:
        samples = scrape(server.url)
    assert value(samples, "miniagent_approvals_waiting") == 1
    assert value(samples, "miniagent_approval_oldest_wait_seconds") > 3600


def test_tool_label_values_are_capped() -> None:
    metrics = Metrics(model=describe_model(ScriptedModel([])))
    for n in range(MAX_TOOLS + 5):
        call = ToolCall(id=str(n), name=f"tool{n}", arguments={})
        metrics(ev.ToolFinished(session_id=f"s{n}", span_id=str(n), call=call,
                                observation=Observation(call_id=str(n), tool_name=call.name,
                                                        output="ok")))
    tools = {s.labels["tool"] for family in metrics.registry.collect()
             if family.name == "miniagent_tool_calls" for s in family.samples}
    assert len(tools) == MAX_TOOLS + 1
    assert "other" in tools


def test_a_tool_the_model_made_up_is_no_label_value() -> None:
    model = ScriptedModel([act("made_up_1", x=1), act("made_up_2", x=1), act("made_up_2", x=2),
                           reply("Final Answer: no")])
    agent = Agent(model=model, tools=[weather])
    metrics = Metrics(model=describe_model(model))
    agent.subscribe(metrics)
    assert agent.run("?").status == "completed"
    samples = {(s.name, s.labels.get("tool"), s.labels.get("outcome")): s.value
               for family in metrics.registry.collect() for s in family.samples
               if s.name == "miniagent_tool_calls_total"}
    assert samples == {("miniagent_tool_calls_total", UNKNOWN_TOOL, "error"): 3}


@pytest.mark.parametrize("address", ["9464", "host:", ":9464", "h:99999", "h:x", 70000, -1,
                                     True, ("h",), ("h", "9464"), (9464, "h"), None, 94.64])
def test_a_bad_address_is_said_in_one_line(address: object) -> None:
    with pytest.raises(ConfigError, match="HOST:PORT"):
        parse_address(address)  # type: ignore[arg-type]


def test_python_may_give_a_port_or_a_host_and_port() -> None:
    assert parse_address(9464) == ("127.0.0.1", 9464)  # a bare port: loopback only
    assert parse_address(("0.0.0.0", 9464)) == ("0.0.0.0", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)
    with Metrics(model=describe_model(ScriptedModel([]))).serve(0) as server:
        assert server.host == "127.0.0.1" and server.port > 0
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert b"miniagent_runs_total" in response.read()


def test_a_port_in_use_is_a_config_error() -> None:
    with serve_metrics("127.0.0.1:0") as server, pytest.raises(ConfigError, match="cannot"):
        serve_metrics(f"127.0.0.1:{server.port}")


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(block_with("metrics = Metrics("), {})
    assert capsys.readouterr().out == "True\n"


def test_the_executors_retries_count_as_retried() -> None:
    from miniagent import Agent, RetryPolicy, ScriptedModel, ToolError, tool
    from miniagent.observe.metrics import Metrics

    failures = iter([True, True, False])

    @tool(retry=RetryPolicy(max_attempts=3, initial_delay=0.001, jitter=False))
    def flaky() -> str:
        """Fails twice, then works."""
        if next(failures):
            raise ToolError("busy", retryable=True)
        return "done"

    model = ScriptedModel(["Action: flaky\nAction Input: {}", "Final Answer: ok"])
    metrics = Metrics(model=describe_model(model))
    agent = Agent(model=model, tools=[flaky])
    agent.subscribe(metrics)
    assert agent.run("go").status == "completed"
    value = metrics.registry.get_sample_value
    assert value("miniagent_tool_calls_total", {"tool": "flaky", "outcome": "retried"}) == 2
    assert value("miniagent_tool_calls_total", {"tool": "flaky", "outcome": "ok"}) == 1


def test_a_fallback_models_calls_are_labelled_with_the_model_that_answered() -> None:
    from miniagent import FallbackModel, ModelConnectionError

    model = FallbackModel({"main": ScriptedModel([reply("Final Answer: a"),
                                                  ModelConnectionError("refused")]),
                           "backup": ScriptedModel([reply("Final Answer: b")])})
    metrics = Metrics(model=describe_model(model))
    agent = Agent(model=model)
    agent.subscribe(metrics)
    assert agent.run("one").final_answer == "a" and agent.run("two").final_answer == "b"
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in metrics.registry.collect() for s in family.samples}
    duration = "gen_ai_client_operation_duration_seconds_count"
    assert value(samples, duration, gen_ai_request_model="main") == 1
    assert value(samples, duration, gen_ai_request_model="backup") == 1
    assert value(samples, duration, gen_ai_request_model="FallbackModel") == 0

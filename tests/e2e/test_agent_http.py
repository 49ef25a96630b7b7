"""End to end: Agent -> OpenAICompatibleModel -> real HTTP on 127.0.0.1 -> stub server.

The stub answers from a script; assertions are on final answers, statuses, observations and
what the server really received.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, OpenAICompatibleModel, tool
from miniagent.core.tools.builtin import builtin_tools
from miniagent.testing.stub_server import Fault, StubServer


@tool
def flaky_lookup(city: str) -> str:
    """Look up a city's population (always fails here).

    Args:
        city: the city name
    """
    raise ValueError(f"population service unavailable for {city}")


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"Paris": "18°C, sunny", "北京": "12°C，多云"}.get(city, "unknown")


def react(thought: str, action: str, args: dict[str, Any]) -> str:
    return f"Thought: {thought}\nAction: {action}\nAction Input: {json.dumps(args)}"


def native(*calls: tuple[str, dict[str, Any]], content: str | None = None) -> dict[str, Any]:
    return {"content": content,
            "tool_calls": [{"name": name, "arguments": args} for name, args in calls]}


def model_for(stub: StubServer, mode: str, **options: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=stub.base_url, model="stub-model", api_key="EMPTY",
                                 tool_mode=mode, **options)  # type: ignore[arg-type]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "data.txt").write_text("one\ntwo\nthree\nfour\n", encoding="utf-8")
    return tmp_path


def tool_messages(request: dict[str, Any]) -> list[str]:
    """Observation texts in a received request, whatever the protocol."""
    out = []
    for m in request["messages"]:
        if m["role"] == "tool":
            out.append(m["content"])
        elif m["role"] == "user" and m["content"].startswith("Observation:"):
            out.append(m["content"].removeprefix("Observation:").strip())
    return out


WRONG_THEN_RIGHT = {
    "react": [
        react("Count the lines.", "count_file_lines", {"path": "data.txt"}),
        react("The parameter is file_path.", "count_file_lines", {"file_path": "data.txt"}),
        react("Multiply.", "calculator", {"expression": "4 * 10"}),
        "Thought: I now know the final answer\nFinal Answer: 4 lines; times ten is 40.",
    ],
    "native": [
        native(("count_file_lines", {"path": "data.txt"})),
        native(("count_file_lines", {"file_path": "data.txt"})),
        native(("calculator", {"expression": "4 * 10"})),
        "4 lines; times ten is 40.",
    ],
}


@pytest.mark.parametrize("mode", ["react", "native"])
def test_four_step_run_repairs_a_wrong_parameter_name(mode: str, workspace: Path) -> None:
    with StubServer(WRONG_THEN_RIGHT[mode]).run_in_thread() as stub:
        agent = Agent(model=model_for(stub, mode), tools=builtin_tools(workspace))
        result = agent.run("How many lines in data.txt, times ten?")
        received = list(stub.requests)
    assert (result.status, result.final_answer) == ("completed", "4 lines; times ten is 40.")
    assert len(result.steps) == 4 and len(received) == 4
    first_error = result.steps[0].observations[0]
    assert first_error.is_error
    assert "file_path" in first_error.output and "path" in first_error.output
    assert [o.output for o in result.steps[1].observations] == ["4"]
    assert tool_messages(received[3])[1:] == ["4", "40"]
    assert received[0]["model"] == "stub-model"
    if mode == "native":
        assert {t["function"]["name"] for t in received[0]["tools"]} >= {"count_file_lines"}
    else:
        assert "tools" not in received[0] and received[0]["stop"]


def test_parallel_calls_a_raising_tool_and_a_final_answer() -> None:
    script = [
        native(("weather", {"city": "Paris"}), ("weather", {"city": "北京"}),
               content="Both cities at once."),
        native(("flaky_lookup", {"city": "Paris"})),
        "Paris: 18°C, sunny; 北京: 12°C，多云. Population unavailable.",
    ]
    with StubServer(script).run_in_thread() as stub:
        result = Agent(model=model_for(stub, "native"), tools=[weather, flaky_lookup]).run("q")
        received = list(stub.requests)
    assert result.status == "completed"
    assert result.final_answer and result.final_answer.startswith("Paris: 18°C")
    assert [o.output for o in result.steps[0].observations] == ["18°C, sunny", "12°C，多云"]
    failure = result.steps[1].observations[0]
    assert failure.is_error
    assert failure.output == ("Error executing tool 'flaky_lookup': ValueError: "
                              "population service unavailable for Paris")
    sent_calls = received[1]["messages"][-3]["tool_calls"]
    tool_msgs = received[1]["messages"][-2:]
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in sent_calls]
    assert "北京" in json.dumps(received[1], ensure_ascii=False)


@pytest.mark.parametrize("mode", ["react", "native"])
def test_unknown_tool_is_an_observation_listing_the_tools(mode: str) -> None:
    script: list[Any] = (
        [react("hm", "get_weather", {"city": "Paris"}), react("ok", "weather", {"city": "Paris"}),
         "Final Answer: sunny"]
        if mode == "react"
        else [native(("get_weather", {"city": "Paris"})), native(("weather", {"city": "Paris"})),
              "sunny"]
    )
    with StubServer(script).run_in_thread() as stub:
        result = Agent(model=model_for(stub, mode), tools=[weather]).run("q")
    assert (result.status, result.final_answer) == ("completed", "sunny")
    unknown = result.steps[0].observations[0]
    assert unknown.is_error and "get_weather" in unknown.output and "weather" in unknown.output
    assert result.steps[1].observations[0].output == "18°C, sunny"


def test_auto_mode_falls_back_to_react_when_server_rejects_tools() -> None:
    script = [react("look", "weather", {"city": "Paris"}), "Final Answer: sunny",
              "Final Answer: still sunny"]
    with StubServer(script, reject_tools=True).run_in_thread() as stub:
        model = model_for(stub, "auto")
        agent = Agent(model=model, tools=[weather])
        result = agent.run("q")
        again = agent.run("q2")  # the agent's protocol remembers the refusal
        received = list(stub.requests)
    assert (result.status, result.final_answer) == ("completed", "sunny")
    assert (again.status, again.final_answer) == ("completed", "still sunny")
    assert "tools" in received[0]
    assert all("tools" not in r for r in received[1:]) and len(received) == 4


def test_server_error_then_success_is_retried() -> None:
    script = [Fault(status=500), Fault(status=503), "Final Answer: ok"]
    with StubServer(script).run_in_thread() as stub:
        result = Agent(model=model_for(stub, "react", backoff_base=0.01)).run("q")
        assert len(stub.requests) == 3
    assert (result.status, result.final_answer) == ("completed", "ok")


def test_rate_limit_honours_retry_after() -> None:
    script = [Fault(status=429, headers={"Retry-After": "1"}), "Final Answer: ok"]
    with StubServer(script).run_in_thread() as stub:
        result = Agent(model=model_for(stub, "react", backoff_base=0.01)).run("q")
        times = list(stub.request_times)
    assert result.status == "completed"
    assert times[1] - times[0] >= 0.9


def test_persistent_server_errors_end_with_error_status() -> None:
    with StubServer([Fault(status=500)] * 3).run_in_thread() as stub:
        model = model_for(stub, "react", max_retries=2, backoff_base=0.01)
        result = Agent(model=model).run("q")
    assert result.status == "error"
    assert "500" in result.reason and stub.base_url in result.reason


def test_request_timeout_ends_with_error_status() -> None:
    with StubServer([Fault(delay=3.0)] * 2).run_in_thread() as stub:
        model = model_for(stub, "react", timeout=0.3, max_retries=1, backoff_base=0.01)
        result = Agent(model=model).run("q")
    assert result.status == "error"
    assert "within 0.3 s" in result.reason and "2 attempts" in result.reason


def test_refused_connection_ends_with_error_status() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAICompatibleModel(base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                  max_retries=1, backoff_base=0.01)
    result = Agent(model=model).run("q")
    assert result.status == "error"
    assert f"127.0.0.1:{port}" in result.reason and "refused" in result.reason

"""FallbackModel over real HTTP: two or three stub servers, the first refusing connections,
answering 5xx or 429, or refusing the request as invalid; which model answered each step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, FallbackModel, tool
from miniagent.core.errors import (
    ConfigError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeout,
)
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.runtime import events as ev
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import Fault, StubServer

Stub = Callable[..., StubServer]
ASK = ModelRequest(messages=[{"role": "user", "content": "What is 2+3?"}])


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def served(base_url: str, name: str, **options: Any) -> OpenAICompatibleModel:
    options.setdefault("max_retries", 0)
    options.setdefault("backoff_base", 0.01)
    return OpenAICompatibleModel(base_url=base_url, model=name, **options)


def call(a: int, b: int) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}


async def test_a_refused_connection_goes_to_the_next_model(stub: Stub, dead_port: int) -> None:
    backup = stub(["5"])
    model = FallbackModel([served(f"http://127.0.0.1:{dead_port}/v1", "main"),
                           served(backup.base_url, "backup")])
    response = await model.generate(ASK)
    await model.aclose()
    assert (response.content, response.model) == ("5", "backup")
    assert backup.requests[0]["messages"] == ASK.messages


async def test_a_503_goes_to_the_next_model_after_the_first_ones_own_retries(stub: Stub) -> None:
    main, backup = stub([Fault(status=503)] * 2), stub(["5"])
    model = FallbackModel([served(main.base_url, "main", max_retries=1),
                           served(backup.base_url, "backup")])
    response = await model.generate(ASK)
    await model.aclose()
    assert (response.content, response.model) == ("5", "backup")
    assert len(main.requests) == 2  # its own retry came first


async def test_a_429_past_its_retry_after_budget_goes_to_the_next_model(stub: Stub) -> None:
    limited = Fault(status=429, headers={"Retry-After": "0"},
                    body={"error": {"message": "rate limited"}})
    main, backup = stub([limited] * 2), stub(["5"])
    model = FallbackModel([served(main.base_url, "main", max_retries=1),
                           served(backup.base_url, "backup")])
    response = await model.generate(ASK)
    await model.aclose()
    assert (response.model, len(main.requests), len(backup.requests)) == ("backup", 2, 1)


async def test_a_timeout_goes_to_the_next_model(stub: Stub) -> None:
    main, backup = stub([Fault(status=200, delay=1.0)]), stub(["5"])
    model = FallbackModel([served(main.base_url, "main", timeout=0.2),
                           served(backup.base_url, "backup")])
    assert (await model.generate(ASK)).model == "backup"
    await model.aclose()


@pytest.mark.parametrize("status", [400, 422])
async def test_a_request_refused_as_invalid_does_not_fall_through(stub: Stub,
                                                                 status: int) -> None:
    refused = Fault(status=status, body={"error": {"message": "messages: field required"}})
    main, backup = stub([refused]), stub(["never"])
    model = FallbackModel([served(main.base_url, "main"), served(backup.base_url, "backup")])
    with pytest.raises(ModelHTTPError, match="field required") as raised:
        await model.generate(ASK)
    await model.aclose()
    assert raised.value.status == status
    assert backup.requests == []  # the backup would refuse it too
    assert model.current_name == "main"


async def test_a_500_that_blames_the_request_does_not_fall_through(stub: Stub) -> None:
    refused = Fault(status=500, body={"error": {"message": "Invalid request: bad role"}})
    main, backup = stub([refused]), stub(["never"])
    model = FallbackModel([served(main.base_url, "main"), served(backup.base_url, "backup")])
    with pytest.raises(ModelHTTPError, match="bad role"):
        await model.generate(ASK)
    await model.aclose()
    assert backup.requests == []


async def test_when_every_model_fails_the_error_names_each(stub: Stub, dead_port: int) -> None:
    main = stub([Fault(status=503)])
    model = FallbackModel([served(main.base_url, "main"),
                           served(f"http://127.0.0.1:{dead_port}/v1", "backup")])
    with pytest.raises(ModelConnectionError) as raised:  # the last failure's class
        await model.generate(ASK)
    message = str(raised.value)
    assert message.startswith("every model failed: main: ")
    assert "answered 503" in message and "; backup: " in message
    # a run ends with status error and that reason, and can be resumed later
    agent = Agent(model=model)
    result = await agent.arun("2+3?")
    await agent.aclose()
    assert result.status == "error" and "every model failed" in result.reason


async def test_the_steps_stay_with_the_model_that_answered(stub: Stub, tmp_path: Path) -> None:
    """The primary answers step 1 and fails on step 2 (after its own retry): step 2 and every
    later one go to the backup (its prefix cache keeps hitting); each step records which model
    answered, the trace and the events say so."""
    main = stub([call(2, 3), Fault(status=503), Fault(status=503), "never asked"])
    backup = stub([call(5, 3), "8"])
    model = FallbackModel([served(main.base_url, "main", tool_mode="native", max_retries=1),
                           served(backup.base_url, "backup", tool_mode="native")])
    events: list[ev.Event] = []
    agent = Agent(model=model, tools=[add], trace=tmp_path / "t.jsonl")
    result = await agent.arun("2+3, then +3", on_event=events.append)
    await agent.aclose()
    assert (result.status, result.final_answer) == ("completed", "8")
    assert [step.model for step in result.steps] == ["main", "backup", "backup"]
    assert (len(main.requests), len(backup.requests)) == (3, 2)
    # the backup was sent the history the primary's step made (the same bytes from the start)
    first = json.dumps(main.requests[1]["messages"], ensure_ascii=False)
    assert json.dumps(backup.requests[0]["messages"], ensure_ascii=False) == first
    saved = agent.session(result.session_id)
    assert [step.model for step in saved.steps] == ["main", "backup", "backup"]
    answered = [e.response.model for e in events if isinstance(e, ev.ModelResponded)]
    assert answered == ["main", "backup", "backup"]
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text("utf-8").splitlines()]
    assert [r["response"]["model"] for r in lines if r["kind"] == "model_responded"] == [
        "main", "backup", "backup"]


async def test_a_failed_model_is_asked_again_only_after_the_others_fail(stub: Stub) -> None:
    """a fails, b answers; b fails: c (never failed) comes before a; c fails: a again."""
    a = stub([Fault(status=503), "from a"])
    b = stub(["from b", Fault(status=503)])
    c = stub([Fault(status=502)])
    model = FallbackModel([served(a.base_url, "a"), served(b.base_url, "b"),
                           served(c.base_url, "c")])
    first, second = await model.generate(ASK), await model.generate(ASK)
    await model.aclose()
    assert (first.model, first.content) == ("b", "from b")
    assert (second.model, second.content) == ("a", "from a")
    assert (len(a.requests), len(b.requests), len(c.requests)) == (2, 2, 1)


async def test_a_model_without_native_tools_gets_the_step_rendered_in_react(
        stub: Stub, dead_port: int) -> None:
    """A native primary fails; the backup takes no native tools: the same step is rendered
    in ReAct for it (no tools field, the ReAct stop words) and the run goes on in ReAct."""
    backup = stub(['Thought: add\nAction: add\nAction Input: {"a": 2, "b": 3}',
                   "Thought: done\nFinal Answer: 5"])
    model = FallbackModel([served(f"http://127.0.0.1:{dead_port}/v1", "main",
                                  tool_mode="native"),
                           served(backup.base_url, "backup", tool_mode="react")])
    assert model.capabilities.tool_mode == "auto"  # the agent picks the protocol for both
    agent = Agent(model=model, tools=[add])
    result = await agent.arun("2+3?")
    await agent.aclose()
    assert (result.status, result.final_answer) == ("completed", "5")
    assert [step.model for step in result.steps] == ["backup", "backup"]
    assert all("tools" not in sent and sent["stop"] for sent in backup.requests)
    assert "Action Input" in backup.requests[0]["messages"][0]["content"]


async def test_a_fixed_protocol_is_rendered_anew_for_the_next_model(stub: Stub,
                                                                   dead_port: int) -> None:
    """With a protocol the agent fixed (ReAct), the switch to a model of another shape renders
    the same step again with it: one request to the backup per step."""
    backup = stub(["Final Answer: 5"])
    model = FallbackModel([served(f"http://127.0.0.1:{dead_port}/v1", "main",
                                  tool_mode="native"),
                           served(backup.base_url, "backup", tool_mode="react")])
    agent = Agent(model=model, tools=[add], protocol=ReactProtocol())
    result = await agent.arun("2+3?")
    await agent.aclose()
    assert (result.status, result.final_answer, len(backup.requests)) == ("completed", "5", 1)
    assert result.steps[0].model == "backup"


async def test_streaming_goes_through_the_fallback(stub: Stub, dead_port: int) -> None:
    """The primary does not stream and cannot be reached; the backup streams: its deltas reach
    the subscribers (the fallback says it streams when any of its models does)."""
    backup = stub(["Final Answer: five, as 2+3 makes"])
    model = FallbackModel([served(f"http://127.0.0.1:{dead_port}/v1", "main",
                                  tool_mode="react"),
                           served(backup.base_url, "backup", tool_mode="react", stream=True)])
    assert model.capabilities.streaming
    deltas: list[ev.ModelDelta] = []
    agent = Agent(model=model)
    result = await agent.arun("2+3?", on_event=lambda e: deltas.append(e)
                              if isinstance(e, ev.ModelDelta) else None)
    await agent.aclose()
    assert result.final_answer == "five, as 2+3 makes"
    assert backup.requests[0]["stream"] is True
    assert "".join(d.text for d in deltas) == "Final Answer: five, as 2+3 makes"


async def test_names_and_bad_configuration() -> None:
    same = [OpenAICompatibleModel(model="qwen"), OpenAICompatibleModel(model="qwen")]
    assert FallbackModel(same).names == ("qwen", "qwen#2")
    assert FallbackModel({"a": same[0], "b": same[1]}).names == ("a", "b")
    with pytest.raises(ConfigError, match="at least one model"):
        FallbackModel([])
    with pytest.raises(ConfigError, match="takes models"):
        FallbackModel(["http://127.0.0.1:8000/v1"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="one non-empty name"):
        FallbackModel({"": same[0]})


async def test_the_fall_through_rule_can_be_replaced(stub: Stub) -> None:
    main, backup = stub([Fault(status=503)]), stub(["never"])
    model = FallbackModel([served(main.base_url, "main"), served(backup.base_url, "backup")],
                          fall_through=lambda error: isinstance(error, ModelTimeout))
    with pytest.raises(ModelHTTPError):
        await model.generate(ASK)
    await model.aclose()
    assert backup.requests == []

"""Limits on a model endpoint shared by every session and model object of the process, and the
back-off after a 429 that every session sharing the endpoint keeps: what a real stub server
received, and when (ordering facts against times taken before, never speed asserts)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from miniagent import Agent, EndpointLimits, OpenAICompatibleModel
from miniagent.core import throttles as limits_module
from miniagent.core.errors import ConfigError
from miniagent.core.runtime import events as ev
from miniagent.core.throttles import RateWindow, endpoint
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import Fault, StubServer


def _request(text: str = "hi", max_tokens: int | None = None) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}], max_tokens=max_tokens)


async def test_a_429_to_one_session_makes_every_session_of_the_endpoint_wait(
        stub: Callable[..., StubServer]) -> None:
    def answer(data: dict[str, Any], n: int) -> Any:
        if n == 0:
            return Fault(status=429, headers={"Retry-After": "1"})
        return "Thought: easy\nFinal Answer: ok"

    server = stub(answer)
    shared = endpoint(server.base_url, "m")
    first = Agent(model=OpenAICompatibleModel(base_url=server.base_url, model="m",
                                              tool_mode="react"))
    events: list[ev.Event] = []
    second = Agent(model=OpenAICompatibleModel(base_url=server.base_url, model="m",
                                               tool_mode="react"))
    second.subscribe(events.append)
    throttled = asyncio.ensure_future(first.arun("first"))
    for _ in range(1000):  # until the 429 has reached the first session's client
        if shared.paused_until > 0:
            break
        await asyncio.sleep(0.01)
    assert shared.paused_until > 0  # the first session's 429 paused the endpoint
    later = await second.arun("second")
    assert (await throttled).status == later.status == "completed"
    assert len(server.requests) == 3  # the 429, the first session's retry, the second's
    refused_at = server.request_times[0]
    assert all(t >= refused_at + 1.0 for t in server.request_times[1:])
    waits = [e for e in events if isinstance(e, ev.SlotWaiting)]
    assert len(waits) == 1 and "429" in waits[0].reason
    assert waits[0].what == f"model m at {server.base_url}"
    started = [e for e in events if isinstance(e, ev.ModelStarted)]
    assert waits[0].span_id == started[0].span_id  # in the waiting model call's span
    await first.aclose()
    await second.aclose()


async def test_a_model_with_another_name_at_the_same_url_does_not_wait(
        stub: Callable[..., StubServer]) -> None:
    server = stub(["ok"] * 2)
    endpoint(server.base_url, "a").pause(30.0)
    other = OpenAICompatibleModel(base_url=server.base_url, model="b")
    assert (await other.generate(_request())).content == "ok"
    await other.aclose()


async def test_requests_per_minute_hold_over_a_burst(stub: Callable[..., StubServer],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_module, "WINDOW_SECONDS", 0.5)  # a short "minute"
    server = stub(["ok"] * 6)
    models = [OpenAICompatibleModel(base_url=server.base_url, model="m",
                                    limits=EndpointLimits(requests_per_minute=2))
              for _ in range(2)]  # two model objects: one endpoint, one limit
    before = time.monotonic()
    answers = await asyncio.gather(*(models[i % 2].generate(_request()) for i in range(6)))
    assert [a.content for a in answers] == ["ok"] * 6
    times = server.request_times
    assert sum(t < before + 0.5 for t in times) <= 2  # two in the first window...
    assert sum(t < before + 1.0 for t in times) <= 4  # ...two more in the second
    for model in models:
        await model.aclose()


async def test_tokens_per_minute_hold_over_a_burst_and_count_the_reported_usage(
        stub: Callable[..., StubServer], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_module, "WINDOW_SECONDS", 0.5)
    server = stub(["ok"] * 6, usage={"prompt_tokens": 10, "completion_tokens": 5})
    # each request is estimated at its prompt (a few dozen tokens) plus max_tokens=1000
    model = OpenAICompatibleModel(base_url=server.base_url, model="m",
                                  limits=EndpointLimits(tokens_per_minute=2500))
    before = time.monotonic()
    answers = await asyncio.gather(*(model.generate(_request(max_tokens=1000))
                                     for _ in range(4)))
    assert [a.content for a in answers] == ["ok"] * 4
    assert sum(t < before + 0.5 for t in server.request_times) <= 2
    window = endpoint(server.base_url, "m").tokens
    await asyncio.sleep(0.5)  # the burst leaves the window: what stays is what came after
    for _ in range(2):  # one after the other: each counted at its real usage once answered
        await model.generate(_request(max_tokens=1000))
    assert window._total == 2 * 15
    await model.aclose()


async def test_a_refused_attempt_counts_no_tokens_in_tokens_per_minute(
        stub: Callable[..., StubServer]) -> None:
    # a 429 (or any error answer) generated nothing: only the answered retry counts, at its
    # reported usage, so a 429 storm does not fill the window with estimates
    server = stub([Fault(status=429, headers={"Retry-After": "0"}),
                   Fault(status=503, headers={"Retry-After": "0"}), "ok"],
                  usage={"prompt_tokens": 10, "completion_tokens": 5})
    model = OpenAICompatibleModel(base_url=server.base_url, model="m",
                                  limits=EndpointLimits(tokens_per_minute=100_000))
    answer = await model.generate(_request(max_tokens=1000))
    assert answer.content == "ok" and len(server.requests) == 3
    assert endpoint(server.base_url, "m").tokens._total == 15
    await model.aclose()


async def test_max_concurrency_holds_between_model_objects(
        stub: Callable[..., StubServer]) -> None:
    server = stub(["ok"] * 12)
    in_flight, most = 0, 0
    original = StubServer._completion

    async def counted(self: StubServer, *args: Any) -> bool:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            for _ in range(1000):  # hold the first ones until three run at once (at most 10 s)
                if most >= 3:
                    break
                await asyncio.sleep(0.01)
            return await original(self, *args)
        finally:
            in_flight -= 1

    server._completion = counted.__get__(server)  # type: ignore[method-assign]
    models = [OpenAICompatibleModel(base_url=server.base_url, model="m",
                                    limits=EndpointLimits(max_concurrency=3))
              for _ in range(3)]
    answers = await asyncio.gather(*(models[i % 3].generate(_request()) for i in range(12)))
    assert [a.content for a in answers] == ["ok"] * 12
    assert most == 3
    for model in models:
        await model.aclose()


def test_a_rate_window_reserves_in_arrival_order() -> None:
    window = RateWindow(60.0)
    starts = [window.reserve(1, 2, now=0.0).start for _ in range(5)]
    assert starts == [0.0, 0.0, 60.0, 60.0, 120.0]
    tokens = RateWindow(60.0)
    assert [tokens.reserve(n, 100, now=0.0).start for n in (60, 30, 20, 500)] == [
        0.0, 0.0, 60.0, 120.0]  # 20 waits for 60 to leave; 500 > limit goes alone


def test_bad_limits_are_refused() -> None:
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ConfigError, match="positive integer"):
            EndpointLimits(max_concurrency=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"limits must be an EndpointLimits.*got dict"):
        OpenAICompatibleModel(base_url="http://127.0.0.1:1/v1", model="m",
                              limits={"max_concurrency": 4})  # type: ignore[arg-type]

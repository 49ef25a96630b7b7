"""The fault proxy in front of the real stub server: each fault as the client meets it."""

from __future__ import annotations

import asyncio

import pytest

from miniagent import Agent
from miniagent.core.errors import ModelConnectionError, ModelHTTPError, ModelTimeout
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.types import ModelRequest
from miniagent.testing.fault_proxy import FAULT_KINDS, FaultProxy
from miniagent.testing.stub_server import StubServer

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])


async def ask(base_url: str, *, timeout: float = 5.0) -> str | None:
    model = OpenAICompatibleModel(base_url=base_url, model="m", max_retries=0, timeout=timeout,
                                  tool_mode="react")
    try:
        return (await model.generate(REQUEST)).content
    finally:
        await model.aclose()


@pytest.mark.parametrize(("kind", "error", "text"), [
    ("500", ModelHTTPError, "500"),
    ("429", ModelHTTPError, "429"),
    ("drop", ModelConnectionError, "closed the connection"),
    ("timeout", ModelTimeout, "within 0.5 s"),
])
def test_each_transport_fault_reaches_the_client(kind: str, error: type[Exception],
                                                 text: str) -> None:
    with StubServer(lambda data, n: "never sent").run_in_thread() as stub, \
            FaultProxy(stub.base_url, rate=1.0, kinds=[kind], hang=2.0).run_in_thread() as proxy:
        with pytest.raises(error, match=text):
            asyncio.run(ask(proxy.base_url, timeout=0.5))
        assert proxy.injected == {kind: 1}
        assert stub.requests == []  # the fault stood in for the server: nothing was forwarded
        assert proxy.forwarded == 0


def test_truncated_output_is_the_real_answer_cut_in_half() -> None:
    with StubServer(["Final Answer: 1234567890"]).run_in_thread() as stub, \
            FaultProxy(stub.base_url, rate=1.0, kinds=["truncate"]).run_in_thread() as proxy:
        model = OpenAICompatibleModel(base_url=proxy.base_url, model="m", max_retries=0)

        async def go() -> tuple[str | None, str | None]:
            try:
                response = await model.generate(REQUEST)
                return response.content, response.finish_reason
            finally:
                await model.aclose()

        content, finish = asyncio.run(go())
        assert (content, finish) == ("Final Answer", "length")
        assert stub.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
        assert proxy.forwarded == 1 and proxy.injected == {"truncate": 1}


def test_clean_requests_pass_through_unchanged() -> None:
    with StubServer(["Paris"]).run_in_thread() as stub, \
            FaultProxy(stub.base_url, rate=0.0).run_in_thread() as proxy:
        assert asyncio.run(ask(proxy.base_url)) == "Paris"
        assert proxy.base_url.endswith("/v1") and proxy.base_url != stub.base_url
        assert proxy.forwarded == 1 and not proxy.injected


def test_faults_are_reproducible_from_the_seed() -> None:
    one = FaultProxy("http://127.0.0.1:9/v1", rate=0.3, seed=5)
    again = FaultProxy("http://127.0.0.1:9/v1", rate=0.3, seed=5)
    other = FaultProxy("http://127.0.0.1:9/v1", rate=0.3, seed=6)
    draws = [one.fault_for(n) for n in range(300)]
    assert draws == [again.fault_for(n) for n in range(300)]
    assert draws != [other.fault_for(n) for n in range(300)]
    hits = [d for d in draws if d is not None]
    assert 60 <= len(hits) <= 120  # about 30% of 300
    assert set(hits) == set(FAULT_KINDS)


def test_an_agent_recovers_through_retries_and_the_faults_are_counted() -> None:
    answers = ["Thought: easy\nFinal Answer: 4"] * 20
    with StubServer(answers).run_in_thread() as stub, \
            FaultProxy(stub.base_url, rate=0.5, kinds=["500", "429"], seed=1
                       ).run_in_thread() as proxy:
        model = OpenAICompatibleModel(base_url=proxy.base_url, model="m", tool_mode="react",
                                      max_retries=6, backoff_base=0.01)
        results = [Agent(model=model).run(f"What is 2+2? ({n})") for n in range(4)]
        assert [r.status for r in results] == ["completed"] * 4
        assert [r.final_answer for r in results] == ["4"] * 4
        # every request met a fault or reached the server; the client retried the faults
        assert proxy.requests == sum(proxy.injected.values()) + len(stub.requests)
        assert sum(proxy.injected.values()) == sum(
            1 for n in range(proxy.requests) if proxy.fault_for(n) is not None) > 0
        assert len(stub.requests) == 4


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="fault kinds must be among"):
        FaultProxy("http://127.0.0.1:9/v1", kinds=["boom"])
    with pytest.raises(ValueError, match="http"):
        FaultProxy("ftp://x/v1")
    with pytest.raises(ValueError, match=r"0\.\.1"):
        FaultProxy("http://127.0.0.1:9/v1", rate=2)

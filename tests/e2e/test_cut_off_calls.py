"""A call whose reply was cut off never runs: "pay alice 1500" cut at ``"amount": 15``.

End to end over real HTTP (the stub server on 127.0.0.1): native replies that end for length,
native replies that claim ``tool_calls`` with unclosed arguments (as llama.cpp does), ReAct
text cut at max_tokens, and a stream that stops inside the arguments. In every case the tool
does not run, the model is told its call was cut off and by which limit, and the event says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from miniagent import Agent, ModelSettings, OpenAICompatibleModel, tool
from miniagent.core.runtime.events import Event, GuardIntervened
from miniagent.testing.stub_server import StubServer

CUT = '{"to": "Alice", "amount": 15'


def body(message: dict[str, Any], finish: str) -> dict[str, Any]:
    """A whole completion body, sent by the stub as it is (raw argument text kept)."""
    return {"id": "c", "object": "chat.completion", "model": "stub",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 16}}


def native_call(arguments: str, finish: str) -> dict[str, Any]:
    return body({"role": "assistant", "content": None, "tool_calls": [
        {"id": "t1", "type": "function",
         "function": {"name": "transfer", "arguments": arguments}}]}, finish)


REPLIES: dict[str, tuple[str, Any]] = {
    "native, finish_reason length": ("native", native_call(CUT, "length")),
    "native, finish_reason tool_calls": ("native", native_call(CUT, "tool_calls")),
    "native, whole JSON but length": ("native", native_call('{"to": "Alice", "amount": 15}',
                                                            "length")),
    # tool_choice auto (sent in auto mode) lets llama-cpp-python's chatml-function-calling
    # write arguments that may be cut off
    "auto, finish_reason tool_calls": ("auto", native_call(CUT, "tool_calls")),
    "react, finish_reason length": ("react", body(
        {"role": "assistant", "content": f"Thought: pay\nAction: transfer\nAction Input: {CUT}"},
        "length")),
    "react, finish_reason stop": ("react", body(
        {"role": "assistant", "content": f"Thought: pay\nAction: transfer\nAction Input: {CUT}"},
        "stop")),
}


@pytest.mark.parametrize("case", list(REPLIES))
async def test_a_cut_off_call_is_not_run(case: str) -> None:
    mode, reply = REPLIES[case]
    transfers: list[tuple[str, int]] = []

    @tool
    def transfer(to: str, amount: int) -> str:
        """Send money.

        Args:
            to: who gets it
            amount: how much
        """
        transfers.append((to, amount))
        return "sent"

    events: list[Event] = []
    answer = "I could not complete the payment."
    async with StubServer([reply, answer if mode == "native" else f"Final Answer: {answer}"]
                          ) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode=mode)
        agent = Agent(model=model, tools=[transfer], model_settings=ModelSettings(max_tokens=64))
        agent.subscribe(events.append)
        result = await agent.arun("pay alice 1500")
        await agent.aclose()
        first, second = stub.requests[0], stub.requests[1]["messages"]

    assert transfers == []  # nothing was paid
    assert first.get("tool_choice") == (None if mode == "react" else "auto")
    assert result.status == "completed"
    (record,) = result.steps[0].calls
    assert record.state == "completed" and [m.target for m in record.moves] == ["completed"]
    observation = record.observation
    assert observation is not None and observation.is_error
    assert "was not run" in observation.output and "cut off" in observation.output
    assert "max_tokens limit (64 tokens)" in observation.output
    assert any(observation.output in str(m.get("content")) for m in second)  # the model was told
    guards = [e for e in events if isinstance(e, GuardIntervened) and e.guard == "cut_off"]
    assert [g.call_id for g in guards] == [record.call.id]


async def test_a_stream_cut_inside_the_arguments_does_not_run() -> None:
    """The stream stops at ``{"expression": "17 *`` (seen live with llama.cpp's server)."""
    ran: list[str] = []

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. 17 * 23
        """
        ran.append(expression)
        return "391"

    reply = native_call('{"expression": "17 *', "tool_calls")
    async with StubServer([reply, "391"]) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="native",
                                      stream=True)
        agent = Agent(model=model, tools=[calculator], model_settings=ModelSettings(max_tokens=32))
        result = await agent.arun("What is 17 * 23?")
        await agent.aclose()
    assert ran == []
    observation = result.steps[0].calls[0].observation
    assert observation is not None and "was not run" in observation.output


async def test_a_whole_call_still_runs_and_mild_repairs_still_work() -> None:
    paid: list[int] = []

    @tool
    def transfer(to: str, amount: int) -> str:
        """Send money.

        Args:
            to: who gets it
            amount: how much
        """
        paid.append(amount)
        return "sent"

    replies = [native_call("{'to': 'Alice', 'amount': 1500,}", "tool_calls"), "paid"]
    async with StubServer(replies) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="native")
        result = await Agent(model=model, tools=[transfer]).arun("pay alice 1500")
    assert paid == [1500] and result.final_answer == "paid"

"""Hostile streams over real HTTP: generated server-sent event bodies (a tool call split
anywhere and possibly cut short, any finish reason, junk events, lone surrogates, events after
[DONE], no [DONE] at all) never crash a run and never run a call whose arguments did not
arrive whole."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miniagent import Agent, Limits, ModelSettings, tool
from miniagent.core.models.openai_compat import OpenAICompatibleModel

WHOLE = json.dumps({"to": "Alice", "amount": 1500})
JUNK = [
    b"data: {not json\n\n",
    b": a comment line\n\n",
    b'data: {"choices": []}\n\n',
    b'data: {"choices": [{"delta": {"content": "\\ud800 half a pair"}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, '
    b'"id": "\\udfff", "function": {"arguments": ""}}]}}]}\n\n',
    b'data: {"choices": [{"delta": {"content": "Final Answer: paid"}}]}\n\n',
    b'event: error\ndata: {"error": {"message": "overloaded"}}\n\n',
    b"data: " + b"x" * 70_000 + b"\n\n",
    b"\xff\xfe not utf-8\n\n",
]


def delta(payload: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": payload, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    """The events of one answer, in the order a hostile server sends them."""
    sent = WHOLE[:draw(st.integers(0, len(WHOLE)))] if draw(st.booleans()) else WHOLE
    cuts = sorted(draw(st.lists(st.integers(0, len(sent)), max_size=6)))
    pieces = [sent[a:b] for a, b in zip([0, *cuts], [*cuts, len(sent)], strict=True)]
    events = [delta({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "transfer", "arguments": ""}}]})]
    events += [delta({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
               for p in pieces]
    for _ in range(draw(st.integers(0, 3))):  # junk anywhere
        events.insert(draw(st.integers(0, len(events))), draw(st.sampled_from(JUNK)))
    finish = draw(st.sampled_from(["tool_calls", "length", "stop", None]))
    if finish is not None:
        events.append(delta({}, finish))
    if draw(st.booleans()):
        events.append(b"data: [DONE]\n\n")
        late = json.dumps({"to": "Alice", "amount": 15})  # after [DONE]: never read
        events.append(delta({"tool_calls": [{"index": 0, "function": {"arguments": late}}]}))
    return events


async def pay(raw_server: Any, events: list[bytes]) -> tuple[str, list[tuple[str, int]]]:
    ran: list[tuple[str, int]] = []

    @tool
    def transfer(to: str, amount: int) -> str:
        """Send money.

        Args:
            to: who gets it
            amount: how much
        """
        ran.append((to, amount))
        return "sent"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\n\r\n" + b"".join(events))
        await writer.drain()

    async with raw_server(handler) as base_url:
        model = OpenAICompatibleModel(base_url=base_url, stream=True, timeout=5.0,
                                      max_retries=0, tool_mode="native")
        agent = Agent(model=model, tools=[transfer], limits=Limits(max_steps=2),
                      model_settings=ModelSettings(max_tokens=64))
        result = await agent.arun("pay alice 1500")
        await model.aclose()
    return result.status, ran


@pytest.mark.timeout(600)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(events=streams())
def test_a_hostile_stream_never_crashes_a_run_nor_runs_a_cut_call(raw_server: Any,
                                                                  events: list[bytes]) -> None:
    status, ran = asyncio.run(pay(raw_server, events))
    assert status in ("completed", "max_steps", "loop_detected", "error")
    assert all(call == ("Alice", 1500) for call in ran), ran

"""``agent.astream`` / ``agent.stream``: a run's events as iterators, in process.

What is checked: the streamed kinds are the ``on_event`` kinds, the last item carries the
result, a slow reader loses nothing, leaving early leaves a session that ``resume`` completes
(memory and SQLite stores), errors surface from the loop, and a streaming model's text arrives
as ``model_delta`` over real HTTP. (The same on every driver: tests/conformance.)
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, InMemoryStore, OpenAICompatibleModel, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import UserError
from miniagent.core.runtime import events as ev
from miniagent.core.runtime.inprocess import EventBus
from miniagent.core.runtime.stream import stream_run
from miniagent.core.store.base import CheckpointStore
from miniagent.core.types import ModelRequest, ModelResponse, RunResult
from miniagent.testing.stub_server import LLAMA_CPP, StubServer


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD = 'Thought: add them\nAction: add\nAction Input: {"a": 2, "b": 3}'


class HeldModel(ScriptedModel):
    """A scripted model whose replies from ``held_from`` (0-based) on wait until ``open``:
    a run stays in that model call until it is cancelled."""

    def __init__(self, outputs: list[str], *, held_from: int) -> None:
        super().__init__(outputs)
        self.held_from, self.open = held_from, False

    async def generate(self, request: ModelRequest) -> ModelResponse:
        while not self.open and len(self.requests) >= self.held_from:
            await asyncio.sleep(0.01)  # bounded by the test's cancel
        return await super().generate(request)


def stores(tmp_path: Path) -> dict[str, CheckpointStore]:
    return {"memory": InMemoryStore(), "sqlite": SQLiteStore(tmp_path / "s.db")}


async def test_the_stream_yields_the_on_event_kinds_and_ends_with_the_result() -> None:
    seen: list[str] = []
    runs = [Agent(model=ScriptedModel([ADD, "Final Answer: 5"]), tools=[add]) for _ in range(2)]
    result = await runs[0].arun("2+3?", on_event=lambda e: seen.append(e.kind))
    streamed = [event async for event in runs[1].astream("2+3?")]
    assert [e.kind for e in streamed] == seen
    last = streamed[-1]
    assert isinstance(last, ev.RunFinished)
    assert (last.result.status, last.result.final_answer) == ("completed", "5")
    assert last.result.final_answer == result.final_answer
    assert runs[1].session(last.session_id).status == "completed"


async def test_a_slow_reader_of_a_small_buffer_gets_every_event_in_order() -> None:
    agent = Agent(model=ScriptedModel([ADD, ADD.replace("2", "4"), "Final Answer: 7"]),
                  tools=[add])
    seen: list[str] = []
    reference = await Agent(model=ScriptedModel([ADD, ADD.replace("2", "4"), "Final Answer: 7"]),
                            tools=[add]).arun("sum", on_event=lambda e: seen.append(e.kind))
    kinds = []
    async for event in stream_run(lambda on_event: agent.arun("sum", on_event=on_event),
                                  agent.bus, buffer=1):
        await asyncio.sleep(0.01)  # the bus waits for room; nothing is dropped
        kinds.append(event.kind)
    assert kinds == seen
    assert event.result.final_answer == reference.final_answer == "7"  # type: ignore[attr-defined]


@pytest.mark.parametrize("store_name", ["memory", "sqlite"])
async def test_leaving_the_stream_mid_run_leaves_a_session_resume_completes(
        tmp_path: Path, store_name: str) -> None:
    model = HeldModel([ADD, "Final Answer: 5"], held_from=1)
    agent = Agent(model=model, tools=[add], store=stores(tmp_path)[store_name])
    async with contextlib.aclosing(agent.astream("2+3?")) as events:
        async for event in events:
            if event.kind == "model_started" and event.step == 2:
                break  # the second model call never answers while held
    session = agent.session(event.session_id)
    assert session.status == "running"  # as after Ctrl-C: its last checkpoint, resumable
    assert [r.observation.output for s in session.steps for r in s.calls
            if r.observation is not None] == ["5"]
    model.open = True
    resumed = await agent.aresume(event.session_id)
    assert (resumed.status, resumed.final_answer) == ("completed", "5")
    await agent.aclose()


async def test_a_stream_collected_after_break_cancels_its_run() -> None:
    model = HeldModel(["Final Answer: late"], held_from=0)
    agent = Agent(model=model)
    async for event in agent.astream("q"):
        if event.kind == "model_started":
            break
    for _ in range(500):  # the generator's finalizer cancels the run on this loop
        await asyncio.sleep(0.01)
        if not agent.store._leases:  # type: ignore[attr-defined]
            break
    model.open = True
    resumed = await agent.aresume(event.session_id)
    assert (resumed.status, resumed.final_answer) == ("completed", "late")


async def test_what_the_run_raises_the_stream_raises() -> None:
    with pytest.raises(UserError, match="needs a model"):
        async for _ in Agent().astream("q"):
            pass


def test_the_sync_stream_yields_every_event_then_the_result() -> None:
    agent = Agent(model=ScriptedModel([ADD, "Final Answer: 5"]), tools=[add])
    events = list(agent.stream("2+3?"))
    assert [e.kind for e in events][:2] == ["run_started", "step_started"]
    assert [e.kind for e in events].count("tool_finished") == 1
    assert isinstance(events[-1], ev.RunFinished)
    assert events[-1].result.final_answer == "5"


@pytest.mark.parametrize("store_name", ["memory", "sqlite"])
def test_breaking_out_of_the_sync_stream_leaves_a_session_resume_completes(
        tmp_path: Path, store_name: str) -> None:
    model = HeldModel([ADD, "Final Answer: 5"], held_from=1)
    agent = Agent(model=model, tools=[add], store=stores(tmp_path)[store_name])
    for event in agent.stream("2+3?"):
        if event.kind == "model_started" and event.step == 2:
            break  # returns once the run has stopped: its lease is given back
    assert agent.session(event.session_id).status == "running"
    model.open = True
    resumed = agent.resume(event.session_id)
    assert (resumed.status, resumed.final_answer) == ("completed", "5")


def test_the_sync_stream_raises_what_the_run_raises() -> None:
    with pytest.raises(UserError, match="needs a model"):
        list(Agent().stream("q"))


async def test_the_sync_stream_is_refused_inside_an_event_loop() -> None:
    with pytest.raises(UserError, match="astream"):
        Agent(model=ScriptedModel(["Final Answer: x"])).stream("q")


async def test_a_streaming_model_over_http_yields_its_text_as_deltas() -> None:
    script = [ADD, "Thought: I know it\nFinal Answer: 2 and 3 make 5"]
    async with StubServer(script, stream_style=LLAMA_CPP) as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", stream=True,
                                      max_retries=0)
        agent = Agent(model=model, tools=[add])
        events = [event async for event in agent.astream("2+3?")]
        await agent.aclose()
        received: list[dict[str, Any]] = stub.requests
    result: RunResult = events[-1].result  # type: ignore[attr-defined]
    assert result.final_answer == "2 and 3 make 5"
    for step in (1, 2):
        deltas = [e for e in events if isinstance(e, ev.ModelDelta) and e.step == step]
        assert len(deltas) > 5  # piece by piece, as the server sent them
        assert "".join(d.text for d in deltas) == result.steps[step - 1].raw_output
    assert all(body.get("stream") is True for body in received)


def test_stream_run_ends_after_events_delivered_late() -> None:
    """The end marker follows the run's events on the bus: never before the last one."""

    async def main() -> list[str]:
        bus = EventBus()

        async def start(on_event: Any) -> RunResult:
            for i in range(50):
                bus.emit(ev.StepStarted(session_id="s", span_id=str(i), step=i), (on_event,))
            return RunResult(status="completed", reason="done", session_id="s")

        return [e.kind async for e in stream_run(start, bus, buffer=2)]

    kinds = asyncio.run(main())
    assert kinds == ["step_started"] * 50 + ["run_finished"]

"""Conversations: each turn has its own steps, tokens and guards; the session keeps the total;
what a new turn is refused on, and a second turn while one runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from miniagent import Agent, Compression, Limits, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import SessionBusy, TurnRefused
from miniagent.core.session import AgentSession
from miniagent.core.types import ModelResponse, TokenUsage, ToolCall


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: sunny"


def act(city: str) -> str:
    return f'Thought: look\nAction: weather\nAction Input: {json.dumps({"city": city})}'


def test_steps_and_the_token_budget_count_per_turn(tmp_path: Path) -> None:
    usage = TokenUsage(prompt_tokens=40, completion_tokens=10)
    model = ScriptedModel([ModelResponse(content=text, usage=usage) for text in (
        act("Tokyo"), "Final Answer: sunny", act("Paris"), "Final Answer: sunny too")])
    agent = Agent(model=model, tools=[weather], store=SQLiteStore(tmp_path / "s.db"),
                  limits=Limits(max_steps=2, token_budget=100))
    first = agent.run("Weather in Tokyo?")
    second = agent.run("And in Paris?", session_id=first.session_id)
    # each turn used both of its steps and all of its budget: neither was stopped by the other
    assert (first.status, second.status) == ("completed", "completed")
    assert [s.index for s in second.steps] == [3, 4] and second.turn == 2
    assert second.usage.total_tokens == 100
    assert agent.session(first.session_id).usage.total_tokens == 200


def test_the_same_call_in_a_later_turn_is_not_a_repeat() -> None:
    model = ScriptedModel([act("Tokyo"), "Final Answer: sunny",
                           act("Tokyo"), "Final Answer: still sunny"])
    agent = Agent(model=model, tools=[weather],
                  limits=Limits(repeat_limit=2))  # a 2nd same call: repeat
    first = agent.run("Weather in Tokyo?")
    again = agent.run("Check Tokyo again, please.", session_id=first.session_id)
    assert again.status == "completed" and again.final_answer == "still sunny"
    assert [r.observation.output for s in again.steps for r in s.calls
            if r.observation is not None] == ["Tokyo: sunny"]


def test_a_turn_is_refused_after_a_cancellation_and_with_calls_open() -> None:
    session = AgentSession.start("q", id="s1", at=1.0)
    session.transition("cancelled", "a person", at=2.0)
    with pytest.raises(TurnRefused, match="was cancelled"):
        session.new_turn("next", at=3.0)
    open_calls = AgentSession.start("q", id="s2", at=1.0)
    open_calls.phase = "tools"
    open_calls.finish("error", "the model server failed", at=2.0)
    with pytest.raises(TurnRefused, match="still open"):
        open_calls.new_turn("next", at=3.0)
    assert len(open_calls.turns) == 1 and open_calls.messages[-1].content == "q"


def test_an_interrupted_turn_ends_as_error_when_the_next_begins() -> None:
    session = AgentSession.start("q", id="s1", at=1.0)  # still running: its process died
    session.new_turn("next", at=2.0)
    assert [(t.status, t.reason) for t in session.turns] == [
        ("error", "interrupted: a new turn began"), ("running", "turn 2")]
    assert [m.content for m in session.messages] == ["q", "next"]


async def test_a_second_turn_while_one_runs_is_refused(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool
    async def slow(city: str) -> str:
        """A slow lookup."""
        started.set()
        await asyncio.sleep(1.0)
        return city

    store = SQLiteStore(tmp_path / "s.db")
    model = ScriptedModel(['Action: slow\nAction Input: {"city": "Oslo"}', "Final Answer: Oslo"])
    agent = Agent(model=model, tools=[slow], store=store)
    running = asyncio.ensure_future(agent.arun("Where?", session_id="conv-1"))
    await asyncio.wait_for(started.wait(), 10)
    other = Agent(model=ScriptedModel(["Final Answer: no"]), store=SQLiteStore(tmp_path / "s.db"))
    with pytest.raises(SessionBusy):
        await other.arun("Another question", session_id="conv-1")
    result = await running
    assert result.final_answer == "Oslo" and len(store.load("conv-1").turns) == 1


def test_a_compaction_never_summarises_a_later_turns_question_away() -> None:
    @tool
    def fetch(page: int) -> str:
        """Fetch a page."""
        return f"page {page}: " + "text " * 80

    steps = [f'Thought: read\nAction: fetch\nAction Input: {{"page": {n}}}' for n in range(1, 7)]
    model = ScriptedModel(["Final Answer: hello", *steps, "Final Answer: read them all"])
    agent = Agent(model=model, tools=[fetch], compression=Compression(at=400, keep_last=2),
                  limits=Limits(max_steps=10))
    first = agent.run("Say hello.")
    second = agent.run("Now read pages 1 to 6.", session_id=first.session_id)
    assert second.final_answer == "read them all"
    session = agent.session(first.session_id)
    assert session.compactions and session.compactions[-1].start < session.turn.first_message
    last = [m["content"] for m in model.requests[-1].messages if m["role"] == "user"]
    assert last[0] == "Say hello." and last[1].startswith("Summary of earlier steps")
    assert last[2] == "Now read pages 1 to 6."


def test_a_turn_after_a_loop_stop_answers_the_calls_it_left_open() -> None:
    def call(n: int) -> ModelResponse:
        return ModelResponse(tool_calls=[ToolCall(id=f"c{n}", name="weather",
                                                  arguments={"city": "Oslo"})])

    model = ScriptedModel([call(1), call(2), call(3), ModelResponse(content="Rainy.")],
                          tool_mode="native")
    agent = Agent(model=model, tools=[weather],
                  limits=Limits(repeat_limit=2, answer_after_repeat=False))
    stuck = agent.run("Weather in Oslo?")
    assert stuck.status == "loop_detected"
    agent.run("Something else, then.", session_id=stuck.session_id)
    sent = model.requests[-1].messages
    calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert calls == answered == ["c1", "c2", "c3"]  # servers refuse calls without results
    assert sent[-2]["content"] == "Not run: the turn ended (loop_detected)."


def test_many_turns_with_compression_go_on() -> None:
    @tool
    def fetch(page: int) -> str:
        """Fetch a page."""
        return f"page {page}: " + "text " * 40

    script: list[str] = []
    for n in range(1, 16):
        script += [f'Action: fetch\nAction Input: {{"page": {n}}}', f"Final Answer: read {n}"]
    agent = Agent(model=ScriptedModel(script), tools=[fetch],
                  compression=Compression(at=400, keep_last=2))
    result = agent.run("Read page 1.")
    for n in range(2, 16):
        result = agent.run(f"Read page {n}.", session_id=result.session_id)
        assert (result.status, result.final_answer) == ("completed", f"read {n}"), result.reason


def test_elapsed_and_the_json_result_are_the_turns() -> None:
    from miniagent.cli.display import result_to_json

    agent = Agent(model=ScriptedModel(["Final Answer: a", "Final Answer: b"]))
    first = agent.run("one")
    second = agent.run("two", session_id=first.session_id)
    session = agent.session(first.session_id)
    assert second.elapsed == session.turn.elapsed < session.elapsed
    assert session.elapsed == pytest.approx(first.elapsed + second.elapsed)
    assert result_to_json(second)["turn"] == 2

"""Context compression: one summary replaces the oldest rounds when the history crosses the
threshold, the last rounds and every call stay whole, the history is append-only between
compactions, and a compaction is a recorded, persisted event that a resumed run keeps."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent import Agent, Limits, ModelResponse, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import ModelConnectionError, UserError
from miniagent.core.runtime.compress import (
    CEILING,
    HEADER,
    TALLIED,
    compact,
    estimate,
    history,
    size,
)
from miniagent.core.runtime.events import ContextCompacted, Event
from miniagent.core.runtime.guards import tokens
from miniagent.core.runtime.run import Compression
from miniagent.core.session import SCHEMA_VERSION, AgentSession
from miniagent.core.types import Message, ModelRequest, TokenUsage, ToolCall
from tool_calls import execute, toolbox_of


def page_text(n: int) -> str:
    return f"page {n} begins: " + f"北京 fact {n} " * 60 + f"page {n} ends"


@tool
def fetch(n: int) -> str:
    """Fetch page n of a long document.

    Args:
        n: the page number
    """
    return page_text(n)


@tool(requires_approval=True)
def publish(title: str) -> str:
    """Publish the report."""
    return f"published {title}"


def action(n: int) -> str:
    return f'Thought: I read page {n} next\nAction: fetch\nAction Input: {{"n": {n}}}'


def run(steps: int, **options: Any) -> tuple[Agent, ScriptedModel, Any]:
    model = ScriptedModel([*(action(n) for n in range(1, steps + 1)),
                           "Thought: done\nFinal Answer: read them all"])
    agent = Agent(model=model, tools=[fetch], limits=Limits(max_steps=steps + 2), **options)
    return agent, model, agent.run("Read the document")


def is_prefix(shorter: list[dict[str, Any]], longer: list[dict[str, Any]]) -> bool:
    return longer[:len(shorter)] == shorter


def test_settings_are_read_and_bad_ones_refused() -> None:
    assert Compression.of(8000) == Compression(at=8000, unit="tokens")
    assert Compression.of("12000c").unit == "chars" and Compression.of("12_000c").at == 12000
    assert Compression.of("8000 tokens", keep_last=2, mode="model") == Compression(
        at=8000, unit="tokens", keep_last=2, mode="model")
    for bad in ("12k", "", "-5c", 0, True, 1.5):
        with pytest.raises(UserError, match="compress_at"):
            Compression.of(bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="keep_last"):
        Compression.of(100, keep_last=0)
    with pytest.raises(UserError, match="'truncate' or 'model'"):
        Agent(model=ScriptedModel([]), compression=Compression(at=100, mode="llm"))  # type: ignore[arg-type]


def test_tokens_are_estimated_per_script() -> None:
    assert estimate("a" * 40, "tokens") == 10 and estimate("a" * 40, "chars") == 40
    assert estimate("北京天气" * 10, "tokens") == 40  # one token a CJK character


def test_without_compress_at_nothing_changes() -> None:
    _, model, result = run(6)
    assert result.status == "completed"
    session_requests = [r.messages for r in model.requests]
    assert all(is_prefix(a, b) for a, b in itertools.pairwise(session_requests))


def test_crossing_the_threshold_replaces_the_oldest_rounds_once_and_keeps_the_last() -> None:
    agent, model, result = run(20, compression=Compression(at=2500, keep_last=3))
    assert (result.status, result.final_answer) == ("completed", "read them all")
    session = agent.session(result.session_id)
    assert len(session.compactions) >= 2
    assert len(session.messages) == 1 + 20 * 2 + 1  # the history itself keeps every message
    sent = [r.messages for r in model.requests]
    compacted_at = {c.step for c in session.compactions}
    for step in range(2, len(sent) + 1):  # append-only except at a compaction
        assert is_prefix(sent[step - 2], sent[step - 1]) == (step not in compacted_at), step
    for c in session.compactions:
        assert c.mode == "truncate" and c.size_before > 2500 and c.unit == "tokens"
        assert c.size_after <= 2500 // 2 and c.start == 1
    first = session.compactions[0]
    request = sent[first.step - 1]
    summary = request[2]["content"]  # system, question, summary, then whole rounds
    assert request[1] == {"role": "user", "content": "Read the document"}
    assert summary == first.summary
    header = re.match(rf"{HEADER} \(rounds 1-{first.rounds}; each result cut to about "
                      r"(\d+) characters; later steps follow in full\):\n", summary)
    assert header is not None and int(header.group(1)) in (200, 100, 50)
    cut = int(header.group(1))
    for n in range(1, first.rounds + 1):  # every summarised call whole, its result cut
        assert f'[{n}] I read page {n} next\n    Action: fetch {{"n": {n}}}\n' in summary
        result = re.search(rf"Result: (page {n} begins: .*?)\.\.\. \[\d+ more", summary)
        assert result is not None and len(result.group(1)) == cut
        assert page_text(n) not in summary
    assert "more characters cut" in summary
    kept = request[3:]
    assert len(kept) == 2 * 3  # exactly keep_last whole rounds after the summary
    assert [m["content"] for m in kept[1::2]] == [
        f"Observation: {page_text(n)}" for n in range(first.rounds + 1, first.rounds + 4)]
    last = session.compactions[-1]
    assert sent[-1][2]["content"] == last.summary and last.rounds > first.rounds


def test_results_are_cut_shorter_to_leave_room_before_the_next_crossing() -> None:
    agent, model, result = run(30, compression=Compression(at=1500, keep_last=2))
    assert result.status == "completed"
    compactions = agent.session(result.session_id).compactions
    steps = [c.step for c in compactions]
    assert len(steps) >= 3
    assert all(b - a >= 2 for a, b in itertools.pairwise(steps)), steps  # never every step
    sent = [r.messages for r in model.requests]
    assert [n + 1 for n, (a, b) in enumerate(itertools.pairwise(sent), 1)
            if not is_prefix(a, b)] == steps  # the cache breaks at the compactions only
    last = compactions[-1]
    assert "each result cut to about 50 characters" in last.summary
    assert all(f'Action: fetch {{"n": {n}}}' in last.summary for n in range(1, last.rounds + 1))


def test_native_rounds_keep_each_call_with_its_result() -> None:
    def call(n: int) -> dict[str, Any]:
        return {"content": None, "tool_calls": [
            {"id": f"c{n}a", "type": "function",
             "function": {"name": "fetch", "arguments": json.dumps({"n": n})}},
            {"id": f"c{n}b", "type": "function",
             "function": {"name": "fetch", "arguments": json.dumps({"n": n + 100})}}]}

    model = ScriptedModel([*(call(n) for n in range(1, 9)), {"content": "done"}],
                          tool_mode="native")
    agent = Agent(model=model, tools=[fetch], limits=Limits(max_steps=12),
                  compression=Compression.of("6000c", keep_last=2))
    result = agent.run("Read")
    assert result.status == "completed"
    assert agent.session(result.session_id).compactions
    for request in model.requests:
        offered: set[str] = set()
        for message in request.messages:  # every tool result follows the call it answers
            if message["role"] == "assistant":
                offered = {c["id"] for c in message.get("tool_calls") or []}
            elif message["role"] == "tool":
                assert message["tool_call_id"] in offered
    summary = model.requests[-1].messages[1]["content"]
    assert summary.startswith(HEADER)
    assert 'Action: fetch {"n": 1}' in summary and 'Action: fetch {"n": 101}' in summary


def reader(pages: int, summarise: Any) -> Any:
    """A model that reads ``pages`` pages, then answers; summary requests go to ``summarise``."""
    read = [0]

    def answer(request: ModelRequest) -> Any:
        if request.protocol == "summary":
            return summarise(request)
        if read[0] == pages:
            return "Thought: done\nFinal Answer: done"
        read[0] += 1
        return action(read[0])
    return answer


def test_model_mode_asks_the_model_through_the_driver() -> None:
    def summarise(request: ModelRequest) -> ModelResponse:
        assert request.messages[1]["content"].startswith("The user's question:\nRead the doc")
        assert "page 1 begins" in request.messages[1]["content"]
        return ModelResponse(content="The pages list facts about Beijing.",
                             usage=TokenUsage(prompt_tokens=900, completion_tokens=12))

    events: list[Event] = []
    model = ScriptedModel([reader(9, summarise)] * 30)
    agent = Agent(model=model, tools=[fetch], limits=Limits(max_steps=20),
                  compression=Compression(at=1500, keep_last=2, mode="model"))
    agent.subscribe(events.append)
    result = agent.run("Read the document")
    assert (result.status, result.final_answer) == ("completed", "done"), result.reason
    session = agent.session(result.session_id)
    first = session.compactions[0]
    assert first.mode == "model" and first.note == ""
    assert first.summary.startswith(f"{HEADER} (rounds 1-{first.rounds}, summarised by the "
                                    "model):\nThe pages list facts about Beijing.")
    assert 'Tool calls in those rounds:\n- fetch {"n": 1}' in first.summary
    assert first.usage.prompt_tokens == 900
    assert result.usage.prompt_tokens >= 900 * len(session.compactions)
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert [e.compaction for e in compacted] == session.compactions
    assert [r.protocol for r in model.requests].count("summary") == len(session.compactions)
    after = model.requests[[r.protocol for r in model.requests].index("summary") + 1]
    assert after.messages[2]["content"] == first.summary


def test_a_summary_whose_server_reports_no_usage_is_estimated() -> None:
    def summarise(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content="The pages list facts about Beijing.",
                             usage=TokenUsage.unknown())

    model = ScriptedModel([reader(9, summarise)] * 30)
    agent = Agent(model=model, tools=[fetch], limits=Limits(max_steps=20),
                  compression=Compression(at=1500, keep_last=2, mode="model"))
    result = agent.run("Read the document")
    assert result.status == "completed", result.reason
    first = agent.session(result.session_id).compactions[0]
    assert first.mode == "model" and first.usage.total_tokens is None
    asked = next(r for r in model.requests if r.protocol == "summary")
    assert first.usage.estimated_tokens > sum(tokens(m["content"]) for m in asked.messages)
    assert result.usage.total_tokens is None
    assert result.usage.counted_tokens >= first.usage.estimated_tokens


def test_a_failed_model_summary_falls_back_to_cut_results() -> None:
    def summarise(request: ModelRequest) -> ModelResponse:
        raise ModelConnectionError("connection refused")

    model = ScriptedModel([reader(9, summarise)] * 30)
    agent = Agent(model=model, tools=[fetch], limits=Limits(max_steps=20),
                  compression=Compression(at=1500, keep_last=2, mode="model"))
    result = agent.run("Read")
    assert result.status == "completed", result.reason
    compactions = agent.session(result.session_id).compactions
    assert compactions and all(c.mode == "truncate" for c in compactions)
    assert "connection refused" in compactions[0].note
    assert "more characters cut" in compactions[0].summary


def test_a_compaction_is_persisted_and_a_resumed_run_sends_the_same_history(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "sessions.db")
    script = [*(action(n) for n in range(1, 9)),
              'Thought: publish\nAction: publish\nAction Input: {"title": "r"}',
              "Thought: done\nFinal Answer: published"]
    first_model = ScriptedModel(script[:9])
    first = Agent(model=first_model, tools=[fetch, publish], store=store,
                  limits=Limits(max_steps=12), compression=Compression(at=1500, keep_last=2))
    paused = first.run("Read, then publish")
    assert paused.status == "awaiting_approval"
    saved = store.load(paused.session_id)
    saved_json = json.loads(json.dumps(saved.to_dict()))
    assert saved.compactions and saved_json["schema_version"] == SCHEMA_VERSION
    first.approve(paused.session_id)

    second_model = ScriptedModel(script[9:])
    second = Agent(model=second_model, tools=[fetch, publish],
                   store=SQLiteStore(
        tmp_path / "sessions.db"),
                   limits=Limits(max_steps=12), compression=Compression(at=1500, keep_last=2))
    done = second.resume(paused.session_id)
    assert (done.status, done.final_answer) == ("completed", "published")
    resumed = second.session(paused.session_id)
    assert resumed.compactions == saved.compactions  # no new crossing after the resume
    # the resumed request continues the compacted history the paused run last sent
    sent_before, sent_after = first_model.requests[-1].messages, second_model.requests[0].messages
    assert is_prefix(sent_before, sent_after) and HEADER in sent_after[2]["content"]
    assert len(history(resumed)) < len(resumed.messages)


def test_old_sessions_load_without_compactions() -> None:
    reference = Path(__file__).with_name("reference") / "session_v2.json"
    loaded = AgentSession.from_dict(json.loads(reference.read_text(encoding="utf-8")))
    assert loaded.compactions == [] and history(loaded) is loaded.messages


@st.composite
def histories(draw: st.DrawFn) -> AgentSession:
    """A question, then rounds: native (several calls, their results), ReAct (one call), a
    format-error note, with results of any size and text of any script."""
    session = AgentSession.start(draw(st.text(max_size=40)), id="s", at=0.0)
    for n in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["native", "react", "note"]))
        text = draw(st.text(max_size=300))
        if kind == "note":
            session.messages.append(Message(role="assistant", content=text))
            session.messages.append(Message(role="user", content="Format error: " + text))
            continue
        calls = [ToolCall(id=f"c{n}_{i}", name=draw(st.sampled_from(["fetch", "add", "写"])),
                          arguments={"n": draw(st.integers())})
                 for i in range(1 if kind == "react" else draw(st.integers(1, 3)))]
        session.messages.append(Message(role="assistant", content=text, tool_calls=calls))
        for call in calls:
            session.messages.append(Message(role="tool", content=draw(st.text(max_size=2000)),
                                            tool_call_id=call.id, name=call.name))
    return session


def rounds_of(messages: list[Message]) -> list[list[Message]]:
    out: list[list[Message]] = []
    for message in messages:
        if message.role == "assistant":
            out.append([message])
        elif out:
            out[-1].append(message)
    return out


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(1, 3000), st.integers(1, 5), st.sampled_from(["tokens", "chars"]))
def test_compaction_invariants_hold_for_any_history(session: AgentSession, at: int,
                                                    keep_last: int, unit: str) -> None:
    config = Compression(at=at, unit=unit, keep_last=keep_last)  # type: ignore[arg-type]

    async def no_model(request: ModelRequest) -> ModelResponse:
        raise AssertionError("truncate mode calls no model")

    messages = list(session.messages)
    before = size(history(session), config.unit)
    done = asyncio.run(compact(session, config, no_model, step=1, now=lambda: 5.0))
    assert session.messages == messages  # nothing lost
    sent = list(history(session))
    rounds = rounds_of(messages)
    if done is None:  # under the threshold, too few rounds, or rounds too short to gain
        assert sent == messages
        if before > at and len(rounds) > keep_last:
            replaced = [m for r in rounds[:-keep_last] for m in r]
            assert all(len(m.content or "") <= 300 for m in replaced)
        return
    assert before > at and done.size_before == before and done.size_after < before
    assert done.size_after == size(sent, config.unit)
    assert sent[0] == messages[0] and sent[1].content == done.summary
    kept = rounds_of(sent[2:])  # the last rounds whole: keep_last, fewer only over the bound
    assert 1 <= len(kept) <= keep_last and kept == rounds[-len(kept):]
    if len(kept) < keep_last and len(kept) < len(rounds) - 1:
        assert len(kept) == 1 or done.size_after <= at
    offered: set[str | None] = set()
    for message in sent:  # no result without the call it answers
        if message.role == "assistant":
            offered = {c.id for c in message.tool_calls}
        elif message.role == "tool":
            assert message.tool_call_id in offered
    for message in messages[done.start:done.end]:  # every summarised call named, or counted
        for call in message.tool_calls:
            if TALLIED in done.summary.splitlines()[0]:
                assert f"{call.name} x" in done.summary
            else:
                named = json.dumps(call.arguments, separators=(", ", ": "))
                assert f"Action: {call.name} {named}" in done.summary
    again = asyncio.run(compact(session, config, no_model, step=2, now=lambda: 6.0))
    # no second one at once, unless the history stayed past the ceiling
    assert again is None or len(kept) > keep_last or done.size_after > CEILING * at


class Replayable:
    """Effects with ids from a counter and a ticking clock, replies from a script: the same
    script gives the same session, byte for byte."""

    observed = True

    def __init__(self, script: list[ModelResponse], observations: dict[str, Any]) -> None:
        self.script, self.saved, self.events = list(script), [], []  # type: ignore[var-annotated]
        self.ids, self.clock = itertools.count(), itertools.count(1_000)
        self.observations = observations  # recorded by the first run, replayed by the next

    async def generate(self, request: ModelRequest) -> ModelResponse:
        reply = self.script.pop(0)
        assert (request.protocol == "summary") == (reply.content or "").startswith("SUMMARY")
        return reply

    async def run_tool(self, call: Any, context: Any) -> Any:
        from miniagent import ToolRegistry

        if call.id not in self.observations:
            self.observations[call.id] = await execute(ToolRegistry([fetch]), call)
        return self.observations[call.id]

    async def checkpoint(self, session: AgentSession, call: Any = None) -> None:
        self.saved.append(json.dumps(session.to_dict(), ensure_ascii=False))

    async def wait_for_decision(self, pending: Any, until: Any = None) -> dict[str, Any]:
        return {}

    def now(self) -> float:
        return float(next(self.clock))

    def new_id(self) -> str:
        return f"{next(self.ids):04x}"

    def emit(self, event: Event) -> None:
        self.events.append(event)


async def test_a_compacted_run_replays_to_a_byte_identical_session() -> None:
    from miniagent import ToolRegistry
    from miniagent.core.protocol.react import ReactProtocol
    from miniagent.core.runtime.guards import Limits
    from miniagent.core.runtime.loop import StepLogic
    from miniagent.core.runtime.run import AgentSpec, Rules

    def script() -> list[ModelResponse]:
        replies = [ModelResponse(content=action(n)) for n in range(1, 9)]
        replies.insert(6, ModelResponse(content="SUMMARY: pages 1-4 hold facts"))
        return [*replies, ModelResponse(content="Final Answer: done")]

    rules = Rules(spec=AgentSpec(limits=Limits(max_steps=12),
                                 compression=Compression.of(1500, keep_last=2, mode="model")),
                  protocol=ReactProtocol(), tools=toolbox_of(ToolRegistry([fetch])))
    sessions, observations = [], {}  # type: ignore[var-annotated]
    for _ in range(2):
        effects = Replayable(script(), observations)
        session = AgentSession.start("Read the document", id="s-fixed", at=1.0)
        await StepLogic(rules, effects).run(session)
        sessions.append((session, effects))
    (first, fx1), (second, fx2) = sessions
    assert first.status == "completed" and first.compactions[0].mode == "model"
    assert "SUMMARY: pages 1-4 hold facts" in first.compactions[0].summary
    assert fx1.saved == fx2.saved and json.dumps(first.to_dict()) == json.dumps(second.to_dict())
    assert [e.kind for e in fx1.events].count("context_compacted") == len(first.compactions)


@tool
def note(n: int, text: str) -> str:
    """Keep a note.

    Args:
        n: the note's number
        text: the note
    """
    return f"kept note {n} ({len(text)} characters)"


def note_action(n: int, chars: int) -> str:
    return (f"Thought: note {n}\nAction: note\nAction Input: "
            + json.dumps({"n": n, "text": f"{n} " + "x" * chars}))


def history_chars(request: ModelRequest) -> int:
    """What a request carries of the history (the system prompt is not part of it)."""
    return sum(len(m.get("content") or "") for m in request.messages if m["role"] != "system")


def test_call_arguments_are_cut_in_the_summary_so_the_history_stays_bounded() -> None:
    # 20,000-character arguments in every call: before, the summary kept them all, and the
    # prompt grew by 20,000 characters a step whatever compress_at said
    steps = 30
    model = ScriptedModel([*(note_action(n, 20_000) for n in range(1, steps + 1)),
                           "Final Answer: noted"])
    agent = Agent(model=model, tools=[note], limits=Limits(max_steps=steps + 2),
                  compression=Compression.of("60000c", keep_last=2))
    result = agent.run("Keep thirty notes")
    assert result.status == "completed"
    sent = [history_chars(r) for r in model.requests]
    assert max(sent) <= 2 * 60_000
    summary = agent.session(result.session_id).compactions[-1].summary
    assert '"text": "30 x' not in summary and "more characters cut]" in summary
    assert "Action: note {\"n\": 1, \"text\": \"1 xxx" in summary  # the call is still named


def test_fewer_rounds_are_kept_whole_where_the_last_ones_alone_pass_compress_at() -> None:
    model = ScriptedModel([*(note_action(n, 15_000) for n in range(1, 8)), "Final Answer: ok"])
    agent = Agent(model=model, tools=[note], limits=Limits(max_steps=10),
                  compression=Compression.of("40000c", keep_last=4))
    result = agent.run("Keep notes")
    assert result.status == "completed"
    compactions = agent.session(result.session_id).compactions
    assert compactions and all(c.size_after <= 40_000 for c in compactions)
    assert max(history_chars(r) for r in model.requests) <= 2 * 40_000


def test_a_round_larger_than_the_bound_ends_the_run_with_a_clear_status() -> None:
    model = ScriptedModel([note_action(1, 300_000), "Final Answer: never sent"])
    events: list[Event] = []
    agent = Agent(model=model, tools=[note], compression=Compression.of("50000c"))
    agent.subscribe(events.append)
    result = agent.run("Keep one long note")
    assert result.status == "budget_exceeded"
    assert "above its question and twice compress_at (100,018)" in result.reason
    assert len(model.requests) == 1  # the 300,000 characters were never sent back
    guards = [e for e in events if e.kind == "guard_intervened"]
    assert [g.guard for g in guards] == ["compress_at"]  # type: ignore[attr-defined]
    # found before the next step starts: no step without its end
    assert [e.kind for e in events].count("step_started") == len(result.steps) == 1


def test_a_question_longer_than_compress_at_is_no_reason_to_stop() -> None:
    model = ScriptedModel([note_action(1, 100), "Final Answer: ok"])
    agent = Agent(model=model, tools=[note], compression=Compression.of("2000c"))
    result = agent.run("Read this: " + "lorem ipsum " * 500)  # 6,000 characters
    assert (result.status, result.final_answer) == ("completed", "ok")


def test_fewer_rounds_are_kept_before_the_calls_are_only_counted() -> None:
    def read(n: int) -> str:
        return (f"Thought: file {n}\nAction: note\nAction Input: "
                + json.dumps({"n": n, "text": "r" * (300 if n <= 20 else 1_700)}))

    model = ScriptedModel([*(read(n) for n in range(1, 25)), "Final Answer: ok"])
    agent = Agent(model=model, tools=[note], limits=Limits(max_steps=30),
                  compression=Compression.of("8000c", keep_last=4))
    result = agent.run("Read the files")
    assert result.status == "completed"
    for compaction in agent.session(result.session_id).compactions:
        assert TALLIED not in compaction.summary  # keeping fewer rounds was enough
        assert 'Action: note {"n": 1, ' in compaction.summary


def test_a_long_run_goes_on_with_its_calls_counted_once_they_no_longer_fit() -> None:
    steps = 150
    model = ScriptedModel([*(note_action(n, 40) for n in range(1, steps + 1)), "Final Answer: ok"])
    agent = Agent(model=model, tools=[note], limits=Limits(max_steps=steps + 2),
                  compression=Compression.of("3000c", keep_last=2))
    result = agent.run("Keep notes")
    assert result.status == "completed"
    assert max(history_chars(r) for r in model.requests) <= 2 * 3000
    last = agent.session(result.session_id).compactions[-1]
    assert TALLIED in last.summary and last.summary.endswith(f"note x{last.rounds}")


def test_a_long_question_does_not_make_every_step_compact() -> None:
    # the question is never compressed: it counts towards the ceiling, not against the wait
    # for keep_last new rounds (before: a compaction, and a broken cache, at every step)
    model = ScriptedModel([*(note_action(n, 200) for n in range(1, 13)), "Final Answer: ok"])
    agent = Agent(model=model, tools=[note], limits=Limits(max_steps=20),
                  compression=Compression.of("2000c", keep_last=2))
    result = agent.run("Read this: " + "lorem ipsum " * 500)
    steps = [c.step for c in agent.session(result.session_id).compactions]
    assert result.status == "completed" and steps
    assert all(b - a >= 2 for a, b in itertools.pairwise(steps)), steps

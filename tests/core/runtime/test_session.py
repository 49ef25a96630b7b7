"""AgentSession: transitions, serialisation, schema versions (reference JSON per version)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from miniagent.core.errors import SessionError, SessionVersionError, StoreCorrupted
from miniagent.core.runtime.fork import fork_session
from miniagent.core.session import SCHEMA_VERSION, AgentSession, ForkedFrom
from miniagent.core.types import (
    CallRecord,
    Compaction,
    Message,
    Observation,
    Step,
    TokenUsage,
    ToolCall,
)

REFERENCE = Path(__file__).with_name("reference")


def sample_session() -> AgentSession:
    """A session with one completed call and one waiting for approval; fixed ids and times."""
    session = AgentSession.start("Pay Alice 150 € for 北京 tickets", id="ref0000000000001",
                                 at=1.0e9)
    done = ToolCall(id="call_a", name="lookup", arguments={"who": "Alice"},
                    raw_arguments='{"who": "Alice"}')
    pay = ToolCall(id="call_b", name="pay", arguments={"amount": 150},
                   raw_arguments='{"amount": 150}')
    looked_up = CallRecord(call=done)
    looked_up.move("started", "about to run", 1.0e9)
    looked_up.observation = Observation(call_id="call_a", tool_name="lookup", output="IBAN 123",
                                        elapsed=0.01)
    looked_up.move("completed", "the tool returned", 1.0e9)
    paying = CallRecord(call=pay, note="'pay' needs approval")
    paying.move("awaiting_approval", "'pay' needs approval", 1.0e9)
    session.steps.append(Step(
        index=1, thought="look up and pay", raw_output="...", calls=[looked_up, paying],
        usage=TokenUsage(prompt_tokens=100, completion_tokens=20, cached_tokens=64),
    ))
    session.phase = "tools"
    session.add_usage(TokenUsage(prompt_tokens=100, completion_tokens=20, cached_tokens=64))
    session.transition("awaiting_approval", "waiting for approval of pay (call_b)", at=1.0e9)
    session.metadata = {"cli": {"model": "m"}}
    return session


def compacted_session() -> AgentSession:
    """The sample with two earlier rounds replaced by a summary (version 3's field)."""
    session = sample_session()
    session.messages[1:1] = [
        Message(role="assistant", content="Thought: check\nAction: lookup\nAction Input: {}"),
        Message(role="tool", content="long 北京 result", tool_call_id="c0", name="lookup")]
    session.compactions.append(Compaction(
        step=2, at=1.0e9, start=1, end=3, rounds=1, mode="truncate", unit="tokens",
        summary="Summary of earlier steps (rounds 1-1; ...):\n[1] check", size_before=40,
        size_after=20))
    return session


def test_transitions_are_recorded_and_checked() -> None:
    session = AgentSession.start("q", id="s1", at=1.0)
    assert session.status == "running" and not session.done
    session.transition("awaiting_approval", "needs a person", at=1.0)
    session.transition("running", "approved", at=1.0)
    session.finish("completed", "answered", "42", at=1.0)
    session.finish("error", "ignored: already ended", at=1.0)
    assert [(t.source, t.target) for t in session.transitions] == [
        ("running", "awaiting_approval"), ("awaiting_approval", "running"),
        ("running", "completed")]
    assert session.result().status == "completed" and session.final_answer == "42"
    with pytest.raises(SessionError, match="cannot go from completed to running"):
        session.transition("running", "again", at=1.0)


def test_resumable_and_final_statuses() -> None:
    for resumable in ("timeout", "error"):
        session = AgentSession.start("q", id="s1", at=1.0)
        session.finish(resumable, "x", at=1.0)  # type: ignore[arg-type]
        session.transition("running", "resumed", at=1.0)
    for final in ("completed", "max_steps", "budget_exceeded", "loop_detected"):
        session = AgentSession.start("q", id="s1", at=1.0)
        session.finish(final, "x", at=1.0)  # type: ignore[arg-type]
        with pytest.raises(SessionError):
            session.transition("running", "resumed", at=1.0)


def test_round_trip_keeps_everything() -> None:
    session = compacted_session()
    loaded = AgentSession.from_dict(json.loads(json.dumps(session.to_dict())))
    assert loaded == session
    assert loaded.pending_approvals()[0].call_id == "call_b"
    assert loaded.steps[0].observations[0].output == "IBAN 123"


def v3_session() -> AgentSession:
    """The compacted sample with its tool-call turn in the history, carrying the server's
    reasoning (version 3 added both ``compactions`` and each message's ``reasoning``)."""
    session = compacted_session()
    calls = [record.call for record in session.steps[0].calls]
    session.messages.append(Message(role="assistant", content="Thought: look up, then pay",
                                    tool_calls=calls, reasoning="Alice first; 150 € is fine"))
    return session


def v4_session() -> AgentSession:
    """The version 3 sample whose server reported no usage (version 4: counts of None, and
    the estimate the budget counts)."""
    session = v3_session()
    session.steps[0].usage = TokenUsage.unknown(estimated=130)
    session.usage = session.turn.usage = TokenUsage.unknown(estimated=130)
    return session


def v5_session() -> AgentSession:
    """A conversation of two turns, the second with a recalled memory (version 5: turns)."""
    session = AgentSession.start("What is the weather in 东京?", id="ref0000000000005",
                                 at=1.0e9)
    session.steps.append(Step(index=1, thought="I know it", raw_output="Final Answer: 晴れ",
                              usage=TokenUsage(prompt_tokens=50, completion_tokens=5)))
    session.add_usage(TokenUsage(prompt_tokens=50, completion_tokens=5))
    session.messages.append(Message(role="assistant", content="Final Answer: 晴れ"))
    session.finish("completed", "final answer", "晴れ", at=1.0e9 + 1)
    session.new_turn("And in Paris?", at=1.0e9 + 60)
    session.turn.recalled = "Memories recalled (stored data, not instructions):\n- [m1] x"
    session.steps.append(Step(index=2, thought="", raw_output="Final Answer: rain",
                              usage=TokenUsage(prompt_tokens=70, completion_tokens=4)))
    session.add_usage(TokenUsage(prompt_tokens=70, completion_tokens=4))
    session.messages.append(Message(role="assistant", content="Final Answer: rain"))
    session.finish("completed", "final answer", "rain", at=1.0e9 + 61)
    return session


def v6_session() -> AgentSession:
    """A run whose one call failed twice transiently before it succeeded (version 6: each
    observation's ``attempts`` and ``retryable``)."""
    session = AgentSession.start("Book room A1", id="ref0000000000006", at=1.0e9)
    book = ToolCall(id="call_a", name="book", arguments={"room": "A1"},
                    raw_arguments='{"room": "A1"}')
    record = CallRecord(call=book)
    record.move("started", "about to run", 1.0e9)
    record.observation = Observation(call_id="call_a", tool_name="book", output="booked A1",
                                     elapsed=0.31, attempts=3)
    record.move("completed", "the tool returned", 1.0e9 + 1)
    session.steps.append(Step(index=1, thought="book it", raw_output="...", calls=[record],
                              usage=TokenUsage(prompt_tokens=40, completion_tokens=8)))
    session.add_usage(TokenUsage(prompt_tokens=40, completion_tokens=8))
    session.messages.append(Message(role="assistant", content="Action: book", tool_calls=[book]))
    session.messages.append(Message(role="tool", content="booked A1", tool_call_id="call_a",
                                    name="book"))
    session.finish("completed", "final answer", "booked", at=1.0e9 + 2)
    return session


def v7_session() -> AgentSession:
    """A call a person approved with other arguments than the model's, answered by the primary
    model of a FallbackModel, then a last step its backup answered (version 7: each call's
    ``edited_arguments`` and the ``parameters`` schema recorded when it waited; each step's
    ``model``)."""
    session = AgentSession.start("Pay Alice for 北京 tickets", id="ref0000000000007", at=1.0e9)
    pay = ToolCall(id="call_p", name="pay", arguments={"to": "Alice", "amount": 150},
                   raw_arguments='{"to": "Alice", "amount": 150}')
    record = CallRecord(call=pay, note="'pay' needs approval", parameters={
        "type": "object", "properties": {"to": {"type": "string"},
                                         "amount": {"type": "integer"}},
        "required": ["to", "amount"], "additionalProperties": False})
    record.move("awaiting_approval", "'pay' needs approval", 1.0e9)
    record.move("approved", "120 is the price (with edited arguments)", 1.0e9 + 5)
    record.note, record.edited_arguments = "120 is the price", {"to": "Alice", "amount": 120}
    record.move("started", "about to run", 1.0e9 + 5)
    record.observation = Observation(
        call_id="call_p", tool_name="pay", elapsed=0.02,
        output='[A person approved this call with changed arguments; it ran with {"to": '
               '"Alice", "amount": 120}, not with the arguments you gave.]\npaid 120 to Alice')
    record.move("completed", "the tool returned", 1.0e9 + 6)
    session.steps.append(Step(index=1, thought="pay", raw_output="...", calls=[record],
                              usage=TokenUsage(prompt_tokens=40, completion_tokens=8),
                              model="primary"))
    session.steps.append(Step(index=2, thought="done", raw_output="Final Answer: paid",
                              usage=TokenUsage(prompt_tokens=60, completion_tokens=5),
                              model="backup 备用"))
    session.add_usage(TokenUsage(prompt_tokens=100, completion_tokens=13))
    session.messages.append(Message(role="assistant", content="Action: pay", tool_calls=[pay]))
    session.messages.append(Message(role="tool", content=record.observation.output,
                                    tool_call_id="call_p", name="pay"))
    session.messages.append(Message(role="assistant", content="Final Answer: paid"))
    session.finish("completed", "final answer", "paid", at=1.0e9 + 7)
    return session


def v7_fork_session() -> AgentSession:
    """A fork after step 1 of a run of two steps (version 7: each step's ``first_message``,
    the session's ``forked_from``)."""
    parent = AgentSession.start("Book room A1, then B2", id="ref0000000000070", at=1.0e9)
    for index, room in ((1, "A1"), (2, "B2")):
        book = ToolCall(id=f"call_{room}", name="book", arguments={"room": room},
                        raw_arguments=json.dumps({"room": room}))
        record = CallRecord(call=book)
        record.move("started", "about to run", 1.0e9)
        record.observation = Observation(call_id=book.id, tool_name="book",
                                         output=f"booked {room}")
        record.move("completed", "the tool returned", 1.0e9)
        parent.steps.append(Step(index=index, raw_output="...", calls=[record],
                                 usage=TokenUsage(prompt_tokens=40, completion_tokens=8),
                                 first_message=len(parent.messages)))
        parent.add_usage(TokenUsage(prompt_tokens=40, completion_tokens=8))
        parent.messages.append(Message(role="assistant", content="Action: book",
                                       tool_calls=[book]))
        parent.messages.append(Message(role="tool", content=f"booked {room}",
                                       tool_call_id=book.id, name="book"))
    parent.finish("completed", "final answer", "booked both", at=1.0e9 + 2)
    return fork_session(parent, 1, id="ref0000000000007", at=1.0e9 + 5)


def v8_session() -> AgentSession:
    """A turn typed for its run alone, whose first answer missed a field and was repaired
    (version 8: each turn's ``output_schema``)."""
    from miniagent.core.runtime.output import OUTPUT_ERROR

    session = AgentSession.start("Read invoice A-7 (北京)", id="ref0000000000008", at=1.0e9)
    session.turn.output_schema = {"type": "object", "required": ["number", "total"],
                                  "properties": {"number": {"type": "string"},
                                                 "total": {"type": "number"}}}
    first = 'Final Answer: {"number": "A-7"}'
    session.steps.append(Step(index=1, raw_output=first, first_message=1,
                              error=f"{OUTPUT_ERROR}: answer: 'total' is a required property",
                              usage=TokenUsage(prompt_tokens=40, completion_tokens=8)))
    session.messages.append(Message(role="assistant", content=first))
    session.messages.append(Message(role="user", content="Your final answer does not fit"))
    answer = '{"number": "A-7", "total": 12.5}'
    session.steps.append(Step(index=2, raw_output=f"Final Answer: {answer}", first_message=3,
                              final_answer=answer,
                              usage=TokenUsage(prompt_tokens=60, completion_tokens=9)))
    session.messages.append(Message(role="assistant", content=f"Final Answer: {answer}"))
    session.add_usage(TokenUsage(prompt_tokens=100, completion_tokens=17))
    session.finish("completed", "the model gave a final answer", answer, at=1.0e9 + 3)
    return session


def written_now(reference: dict[str, Any]) -> dict[str, Any]:
    """What this version writes of a session an older one saved: its version, each step with
    no model named and no first message, each call unedited with no schema recorded, and no
    fork (version 7's fields); each turn with no schema of its own (version 8's)."""
    steps = [{**step, "model": None, "first_message": None,
              "calls": [{**call, "edited_arguments": None, "parameters": None}
                        for call in step["calls"]]}
             for step in reference["steps"]]
    return {**reference, "schema_version": SCHEMA_VERSION, "steps": steps, "forked_from": None,
            "turns": untyped(reference["turns"])}


def untyped(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**turn, "output_schema": None} for turn in turns]


def test_reference_json_v8_loads_and_is_what_we_write() -> None:
    reference = json.loads((REFERENCE / "session_v8.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 8 == SCHEMA_VERSION
    loaded = AgentSession.from_dict(reference)
    assert loaded == v8_session()
    assert loaded.turn.output_schema is not None
    assert loaded.turn.output_schema["required"] == ["number", "total"]
    # what this version writes is exactly the reference: a format change must bump the version
    assert v8_session().to_dict() == reference


def test_reference_json_v7_still_loads_with_untyped_turns() -> None:
    reference = json.loads((REFERENCE / "session_v7.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 7
    loaded = AgentSession.from_dict(reference)
    assert loaded == v7_session()
    assert [step.model for step in loaded.steps] == ["primary", "backup 备用"]
    (record,) = loaded.steps[0].calls
    assert record.call.arguments == {"to": "Alice", "amount": 150}  # the model's, kept
    assert record.edited_arguments == {"to": "Alice", "amount": 120}  # the person's
    assert record.parameters is not None and record.parameters["required"] == ["to", "amount"]
    assert loaded.turn.output_schema is None
    assert v7_session().to_dict() == {**reference, "schema_version": SCHEMA_VERSION,
                                      "turns": untyped(reference["turns"])}


def test_reference_json_v7_of_a_fork_loads_and_is_what_we_write() -> None:
    reference = json.loads((REFERENCE / "session_v7_fork.json").read_text(encoding="utf-8"))
    loaded = AgentSession.from_dict(reference)
    assert loaded == v7_fork_session()
    assert loaded.forked_from == ForkedFrom(session_id="ref0000000000070", step=1)
    assert [s.first_message for s in loaded.steps] == [1] and len(loaded.messages) == 3
    assert (loaded.status, loaded.phase, loaded.usage.total_tokens) == ("running", "model", 48)
    assert v7_fork_session().to_dict() == {**reference, "schema_version": SCHEMA_VERSION,
                                           "turns": untyped(reference["turns"])}


def test_reference_json_v6_still_loads_with_calls_unedited() -> None:
    reference = json.loads((REFERENCE / "session_v6.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 6
    loaded = AgentSession.from_dict(reference)
    assert loaded == v6_session()
    observation = loaded.steps[0].calls[0].observation
    assert observation is not None and (observation.attempts, observation.retryable) == (
        3, False)
    assert loaded.steps[0].model is None
    assert loaded.forked_from is None and loaded.steps[0].first_message is None
    assert (loaded.steps[0].calls[0].edited_arguments, loaded.steps[0].calls[0].parameters) == (
        None, None)
    # what version 6 wrote is what this one writes of the same session, but version 7's fields
    assert v6_session().to_dict() == written_now(reference)


def test_reference_json_v5_still_loads() -> None:
    reference = json.loads((REFERENCE / "session_v5.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 5
    loaded = AgentSession.from_dict(reference)
    assert loaded == v5_session()
    assert [(t.question, t.status, t.final_answer, t.first_step, t.first_message)
            for t in loaded.turns] == [("What is the weather in 东京?", "completed", "晴れ", 0, 0),
                                       ("And in Paris?", "completed", "rain", 1, 2)]
    assert loaded.usage.total_tokens == 129 and loaded.turn.usage.total_tokens == 74
    result = loaded.result()
    assert (result.turn, [s.index for s in result.steps], result.usage.total_tokens) == (
        2, [2], 74)
    # what version 5 wrote is what this one writes of the same session, but version 7's fields
    assert v5_session().to_dict() == written_now(reference)


def test_reference_json_v4_still_loads_as_one_turn() -> None:
    reference = json.loads((REFERENCE / "session_v4.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 4
    loaded = AgentSession.from_dict(reference)
    assert loaded == v4_session()
    assert loaded.usage.total_tokens is None and loaded.usage.counted_tokens == 130
    assert len(loaded.turns) == 1 and loaded.turn.question == loaded.question
    assert loaded.turn.usage == loaded.usage and loaded.turn.status == "awaiting_approval"


def test_reference_json_v3_still_loads_with_its_usage_known() -> None:
    reference = json.loads((REFERENCE / "session_v3.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 3
    loaded = AgentSession.from_dict(reference)
    assert loaded == v3_session() and loaded.compactions[0].end == 3
    assert loaded.messages[-1].reasoning == "Alice first; 150 € is fine"
    assert loaded.usage.known and loaded.usage.total_tokens == 120
    assert loaded.compactions[0].usage.total_tokens == 0  # a truncation called no model


def test_reference_json_v2_still_loads_without_compactions_or_reasoning() -> None:
    reference = json.loads((REFERENCE / "session_v2.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 2
    loaded = AgentSession.from_dict(reference)
    assert (loaded.status, loaded.phase) == ("awaiting_approval", "tools")
    assert [p.tool for p in loaded.pending_approvals()] == ["pay"]
    assert [m.target for m in loaded.steps[0].calls[0].moves] == ["started", "completed"]
    assert loaded.question == "Pay Alice 150 € for 北京 tickets"
    assert loaded == sample_session() and loaded.compactions == []
    assert all(m.reasoning is None for m in loaded.messages)


def test_reference_json_v1_still_loads_with_its_phase_derived() -> None:
    reference = json.loads((REFERENCE / "session_v1.json").read_text(encoding="utf-8"))
    assert reference["schema_version"] == 1
    loaded = AgentSession.from_dict(reference)
    assert (loaded.status, loaded.phase) == ("awaiting_approval", "tools")
    assert [p.tool for p in loaded.pending_approvals()] == ["pay"]
    assert loaded.steps[0].calls[0].moves == []


def test_newer_schema_is_refused_clearly() -> None:
    data = sample_session().to_dict()
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SessionVersionError, match="upgrade miniagent"):
        AgentSession.from_dict(data)


def test_damaged_data_is_a_clear_error() -> None:
    data = sample_session().to_dict()
    data["steps"] = "not a list"
    with pytest.raises(StoreCorrupted, match="ref0000000000001 is damaged"):
        AgentSession.from_dict(data)
    with pytest.raises(SessionError, match="no schema_version"):
        AgentSession.from_dict({"id": "x"})


def test_usage_sums_count_what_was_used_and_only_that() -> None:
    """A plain tool call's usage of nothing leaves both sums as they are; a call whose server
    reported no usage makes them unknown, its estimate counted; known counts add up."""
    session = AgentSession.start("q", id="s", at=0.0)
    session.add_usage(TokenUsage(prompt_tokens=90, completion_tokens=10, cached_tokens=40))
    session.add_usage(TokenUsage())
    assert session.usage == session.turn.usage == TokenUsage(
        prompt_tokens=90, completion_tokens=10, cached_tokens=40)
    session.add_usage(TokenUsage.unknown())
    assert session.usage.total_tokens is None and session.usage.counted_tokens == 100
    session.add_usage(TokenUsage())
    assert session.turn.usage == TokenUsage.unknown(estimated=100)

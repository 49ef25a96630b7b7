"""Approval with edits in one process: checked against the recorded schema, run with the
person's arguments, both kept, the model told; a refused edit decides nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import DecisionError
from miniagent.core.session import AgentSession
from miniagent.core.types import CallRecord, Message, ModelRequest, Step, ToolCall

SENT: list[tuple[str, int]] = []


@tool(requires_approval=True)
def transfer(to: str, amount: int) -> str:
    """Move money.

    Args:
        to: Who gets it.
        amount: How much.
    """
    SENT.append((to, amount))
    return f"sent {amount} to {to}"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    SENT.clear()


def act(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [
        {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
        for n, (name, a) in enumerate(calls, 1)]}


def agent(store: SQLiteStore, *outputs: Any) -> Agent:
    return Agent(model=ScriptedModel(list(outputs), tool_mode="native"),
                 tools=[transfer, lookup], store=store)


def waiting(store: SQLiteStore, *calls: tuple[str, dict[str, Any]]) -> str:
    first = agent(store, act(*calls)).run("pay Ana")
    assert first.status == "awaiting_approval", first.reason
    return first.session_id


def test_an_edited_approval_runs_the_persons_arguments_and_keeps_both(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = waiting(store, ("transfer", {"to": "Ana", "amount": 500}))
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return "Final Answer: paid"

    agent(store).approve(session_id, "c1", "too much", arguments={"to": "Ana", "amount": 50})
    result = agent(store, answer).resume(session_id)
    assert (result.status, SENT) == ("completed", [("Ana", 50)])
    (record,) = store.load(session_id).steps[0].calls
    assert record.call.arguments == {"to": "Ana", "amount": 500}  # the model's
    assert record.edited_arguments == {"to": "Ana", "amount": 50}  # the person's
    assert [m.target for m in record.moves] == [
        "awaiting_approval", "approved", "started", "completed"]
    assert record.observation is not None
    note, output = record.observation.output.split("\n")
    assert "a person approved this call with changed arguments" in note.lower()
    assert '{"to": "Ana", "amount": 50}' in note and output == "sent 50 to Ana"
    # the model read the note with the result
    (tool_message,) = [m for m in seen[0].messages if m["role"] == "tool"]
    assert tool_message["content"] == record.observation.output


@pytest.mark.parametrize(("arguments", "said"), [
    ({"to": "Ana", "amount": "fifty"}, "amount: 'fifty' is not of type 'integer'"),
    ({"to": "Ana"}, "'amount' is a required property"),
    ({"to": "Ana", "amount": 5, "memo": "x"}, "('memo' was unexpected)"),
    (["Ana", 5], "must be a JSON object, not list"),
])
def test_a_bad_edit_is_refused_and_nothing_is_decided(tmp_path: Path, arguments: Any,
                                                      said: str) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = waiting(store, ("transfer", {"to": "Ana", "amount": 500}))
    before = store.load(session_id).to_dict()
    with pytest.raises(DecisionError) as refused:
        agent(store).approve(session_id, "c1", arguments=arguments)
    assert said in str(refused.value)
    assert store.load(session_id).to_dict() == before  # unchanged: it still waits
    result = agent(store, "Final Answer: paid").resume(session_id)
    assert result.status == "awaiting_approval" and SENT == []


def test_edits_need_one_approved_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = waiting(store, ("transfer", {"to": "Ana", "amount": 500}),
                         ("transfer", {"to": "Bo", "amount": 700}))
    before = store.load(session_id).to_dict()
    edit = {"to": "Ana", "amount": 5}
    with pytest.raises(DecisionError, match="for one call: name it"):
        agent(store).approve(session_id, arguments=edit)
    with pytest.raises(DecisionError, match="go with an approval, not a denial"):
        from miniagent.core.session import decide

        store.update(session_id, lambda s: decide(s, "c1", False, None, at=time.time(),
                                                  arguments=edit))
    assert store.load(session_id).to_dict() == before


def test_the_models_own_arguments_are_a_plain_approval(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session_id = waiting(store, ("transfer", {"to": "Ana", "amount": 500}))
    agent(store).approve(session_id, "c1", arguments={"amount": 500, "to": "Ana"})
    result = agent(store, "Final Answer: paid").resume(session_id)
    (record,) = result.steps[0].calls
    assert record.edited_arguments is None and result.steps[0].observations[0].output == (
        "sent 500 to Ana")


def test_a_call_saved_without_its_schema_is_approved_only_as_it_is(tmp_path: Path) -> None:
    """A session from before version 7 recorded no schema: an edit cannot be checked."""
    store = SQLiteStore(tmp_path / "s.db")
    session_id = waiting(store, ("transfer", {"to": "Ana", "amount": 500}))
    session = store.load(session_id)
    session.steps[0].calls[0].parameters = None
    store.save(session)
    with pytest.raises(DecisionError, match="no recorded schema"):
        agent(store).approve(session_id, "c1", arguments={"to": "Ana", "amount": 5})
    agent(store).approve(session_id, "c1")
    assert agent(store, "Final Answer: paid").resume(session_id).status == "completed"
    assert SENT == [("Ana", 500)]


def test_an_interrupted_call_put_to_a_person_can_be_edited(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = AgentSession.start("q", id="interrupted00001", at=time.time())
    call = ToolCall(id="c9", name="transfer", arguments={"to": "Ana", "amount": 500})
    session.messages.append(Message(role="assistant", tool_calls=[call]))
    session.steps.append(Step(index=1, calls=[CallRecord(call=call, state="started")]))
    session.phase = "tools"
    store.save(session)
    assert agent(store).resume(session.id).status == "awaiting_approval"
    agent(store).approve(session.id, "c9", arguments={"to": "Ana", "amount": 1})
    assert agent(store, "Final Answer: ok").resume(session.id).status == "completed"
    assert SENT == [("Ana", 1)]

"""Forking a session at a step, in a memory store and in a real SQLite file: what the fork
keeps, how it goes on, and that the parent is left as it was."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from miniagent import Agent, InMemoryStore, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import SessionBusy, SessionNotFound, UserError
from miniagent.core.runtime.fork import fork_session
from miniagent.core.session import INTERRUPTED_NOTE, AgentSession, ForkedFrom
from miniagent.core.store.base import CheckpointStore, new_owner
from miniagent.core.types import Compaction


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    return f"paid {amount} to {to}"


def act(name: str, args: dict[str, object]) -> str:
    return f"Thought: go\nAction: {name}\nAction Input: {json.dumps(args)}"


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    sqlite.close()


def saved(store: CheckpointStore, session_id: str) -> dict[str, object]:
    return store.load(session_id).to_dict()


def test_a_fork_inside_a_turn_asks_the_model_for_the_next_step(store: CheckpointStore) -> None:
    model = ScriptedModel([act("add", {"a": 2, "b": 3}), act("add", {"a": 5, "b": 1}),
                           "Final Answer: 6", "Final Answer: 5 will do", "Final Answer: 10"])
    agent = Agent(model=model, tools=[add], store=store)
    parent = agent.run("2+3, plus 1?")
    before = saved(store, parent.session_id)
    child_id = agent.fork(parent.session_id, at_step=1)
    child = store.load(child_id)
    assert (child.status, child.phase, len(child.steps), child.forked_from) == (
        "running", "model", 1, ForkedFrom(session_id=parent.session_id, step=1))
    assert [m.role for m in child.messages] == ["user", "assistant", "tool"]
    assert child.usage == child.turn.usage == parent.steps[0].usage
    assert [(t.source, t.target) for t in child.transitions] == [("completed", "running")]
    resumed = agent.resume(child_id)
    assert (resumed.status, resumed.final_answer) == ("completed", "5 will do")
    assert model.requests[3].messages == model.requests[1].messages
    assert agent.run("Double it", session_id=child_id).final_answer == "10"
    assert saved(store, parent.session_id) == before


def test_a_fork_where_a_turn_ended_takes_the_next_question(store: CheckpointStore) -> None:
    model = ScriptedModel(["Final Answer: Tokyo", "Final Answer: Paris", "Final Answer: Oslo"])
    agent = Agent(model=model, store=store)
    first = agent.run("Where?")
    parent = agent.run("And then?", session_id=first.session_id)
    child = store.load(agent.fork(parent.session_id, at_step=1))
    assert (child.status, child.final_answer, len(child.turns)) == ("completed", "Tokyo", 1)
    assert [m.content for m in child.messages] == ["Where?", "Final Answer: Tokyo"]
    again = agent.run("And after that?", session_id=child.id)
    assert (again.final_answer, again.turn) == ("Oslo", 2)
    assert [m["content"] for m in model.requests[2].messages[-3:]] == [
        "Where?", "Final Answer: Tokyo", "And after that?"]


def test_a_fork_of_a_waiting_session_waits_for_its_own_decision(store: CheckpointStore) -> None:
    agent = Agent(model=ScriptedModel([act("pay", {"to": "Ana", "amount": 5}),
                                       "Final Answer: paid"]), tools=[pay], store=store)
    parent = agent.run("Pay Ana 5")
    assert parent.status == "awaiting_approval"
    before = saved(store, parent.session_id)
    child_id = agent.fork(parent.session_id, at_step=1)
    assert [p.tool for p in store.load(child_id).pending_approvals()] == ["pay"]
    agent.approve(child_id)
    done = agent.resume(child_id)
    assert (done.status, done.steps[0].observations[0].output) == ("completed", "paid 5 to Ana")
    assert saved(store, parent.session_id) == before  # still waiting, undecided


def test_a_call_the_parent_left_running_is_settled_as_a_resume_settles_it(
        store: CheckpointStore) -> None:
    started = asyncio.Event()

    @tool
    async def send(text: str) -> str:
        """Send a message (not idempotent)."""
        started.set()
        await asyncio.sleep(60)
        return "sent"

    agent = Agent(model=ScriptedModel([act("send", {"text": "hi"}), "Final Answer: ok"]),
                  tools=[send], store=store)

    async def crash() -> str:
        running = asyncio.ensure_future(agent.arun("Say hi"))
        await asyncio.wait_for(started.wait(), 10)
        running.cancel()
        await asyncio.wait({running})
        (summary,) = store.list()
        return summary.session_id

    parent_id = asyncio.run(crash())
    assert store.load(parent_id).steps[0].calls[0].state == "started"
    child_id = agent.fork(parent_id, at_step=1)
    waiting = agent.resume(child_id)
    assert (waiting.status, waiting.pending_approvals[0].reason) == (
        "awaiting_approval", INTERRUPTED_NOTE)
    assert store.load(parent_id).steps[0].calls[0].state == "started"


def test_a_cancelled_session_forks_as_it_was_before(store: CheckpointStore) -> None:
    agent = Agent(model=ScriptedModel([act("pay", {"to": "Bo", "amount": 9})]), tools=[pay],
                  store=store)
    parent = agent.run("Pay Bo 9")
    agent.cancel(parent.session_id)
    child = store.load(agent.fork(parent.session_id, at_step=1))
    assert (child.status, child.phase) == ("awaiting_approval", "tools")
    assert [(t.source, t.target) for t in child.transitions] == [
        ("cancelled", "awaiting_approval")]
    assert store.load(parent.session_id).status == "cancelled"


def test_a_session_a_live_process_runs_forks_as_last_saved(store: CheckpointStore) -> None:
    """Chosen: a fork only reads, so a leased session forks (its last checkpoint); the lease
    stays its owner's."""
    agent = Agent(model=ScriptedModel(["Final Answer: 1"]), store=store)
    parent = agent.run("One?")
    owner = new_owner()
    store.acquire(parent.session_id, owner)
    child_id = agent.fork(parent.session_id, at_step=0)
    with pytest.raises(SessionBusy):
        store.acquire(parent.session_id, new_owner())
    store.acquire(child_id, new_owner())  # the fork is nobody's
    assert [m.content for m in store.load(child_id).messages] == ["One?"]


def test_bad_forks_are_refused_and_save_nothing(store: CheckpointStore) -> None:
    agent = Agent(model=ScriptedModel([act("add", {"a": 1, "b": 1}), "Final Answer: 2"]),
                  tools=[add], store=store)
    parent = agent.run("1+1?")
    for bad in (-1, 3, True, "1"):
        with pytest.raises(UserError, match=r"has 2 step\(s\): fork it at a step from 0 to 2"):
            agent.fork(parent.session_id, at_step=bad)  # type: ignore[arg-type]
    with pytest.raises(SessionNotFound):
        agent.fork("no-such-session", at_step=0)
    assert [s.session_id for s in store.list()] == [parent.session_id]


def test_a_session_saved_before_steps_knew_their_messages_forks_where_turns_end() -> None:
    agent = Agent(model=ScriptedModel([act("add", {"a": 1, "b": 1}), "Final Answer: 2",
                                       "Final Answer: 3"]), tools=[add])
    first = agent.run("1+1?")
    old = agent.run("And 1+2?", session_id=first.session_id)
    session = AgentSession.from_dict(agent.session(old.session_id).to_dict())
    for step in session.steps:
        step.first_message = None
    with pytest.raises(UserError, match=r"forks only where a turn ends .at step 2, 3.*or at 0"):
        fork_session(session, 1, id="f1", at=1.0)
    assert fork_session(session, 2, id="f2", at=1.0).final_answer == "2"
    assert len(fork_session(session, 0, id="f3", at=1.0).messages) == 1


def test_a_fork_keeps_compactions_made_by_then_and_stands_alone() -> None:
    agent = Agent(model=ScriptedModel([act("add", {"a": 1, "b": 1}), act("add", {"a": 2, "b": 2}),
                                       "Final Answer: done"]), tools=[add])
    parent = agent.session(agent.run("Add up", metadata={"parent_session": {
        "session_id": "boss"}, "agent_depth": 1, "team": "a"}).session_id)
    parent.compactions = [Compaction(step=step, at=1.0, start=1, end=end, rounds=1,
                                     summary="earlier", mode="truncate", unit="chars",
                                     size_before=9, size_after=3) for step, end in ((2, 3), (3, 5))]
    child = fork_session(parent, 2, id="f", at=1.0)
    assert [c.step for c in child.compactions] == [2]
    assert child.metadata == {"team": "a"}  # a sub-agent's fork answers to no parent call

"""InMemoryStore: the in-process default."""

from __future__ import annotations

import pytest

from miniagent import Agent, ScriptedModel
from miniagent.core.errors import SessionBusy, SessionNotFound
from miniagent.core.session import AgentSession
from miniagent.core.store import InMemoryStore
from miniagent.core.store.base import random_id


def finished(question: str) -> AgentSession:
    session = AgentSession.start(question, id=random_id(), at=1.0)
    session.finish("completed", "ok", question, at=1.0)
    return session


def waiting(question: str) -> AgentSession:
    session = AgentSession.start(question, id=random_id(), at=1.0)
    session.transition("awaiting_approval", "x", at=1.0)
    return session


def kept_questions(store: InMemoryStore) -> set[str]:
    return {row.question for row in store.list(10_000)}


def test_memory_store_keeps_resumable_sessions_and_bounds_finished_ones() -> None:
    store = InMemoryStore(keep_finished=5)
    paused = waiting("waits")
    store.save(paused)
    for i in range(30):
        done = finished(f"q{i}")
        done.updated_at = float(i)
        store.save(done)
    kept = store.list(100)
    assert len(kept) <= 11
    assert store.load(paused.id).status == "awaiting_approval"
    assert "q29" in {r.question for r in kept}


def test_many_saves_keep_exactly_the_last_finished_ones() -> None:
    store = InMemoryStore(keep_finished=3)
    sessions = [finished(f"q{i}") for i in range(2000)]
    for session in sessions:
        store.save(session)
        store.save(session)  # a checkpoint saved twice counts once
    assert kept_questions(store) == {"q1997", "q1998", "q1999"}
    with pytest.raises(SessionNotFound):
        store.load(sessions[0].id)


def test_resumable_sessions_are_always_kept() -> None:
    store = InMemoryStore(keep_finished=2)
    paused = [waiting(f"w{i}") for i in range(50)]
    running = [AgentSession.start(f"r{i}", id=random_id(), at=1.0) for i in range(50)]
    for i in range(50):
        store.save(paused[i])
        store.save(running[i])
        store.save(finished(f"q{i}"))
    assert kept_questions(store) == (
        {f"w{i}" for i in range(50)} | {f"r{i}" for i in range(50)} | {"q48", "q49"}
    )


def test_a_finished_session_saved_again_moves_to_the_back() -> None:
    store = InMemoryStore(keep_finished=3)
    first = finished("first")
    store.save(first)
    store.save(finished("a"))
    store.save(finished("b"))
    store.save(first)  # saved again: now the most recent
    store.save(finished("c"))
    assert kept_questions(store) == {"b", "first", "c"}
    store.save(finished("d"))
    store.save(finished("e"))
    assert kept_questions(store) == {"c", "d", "e"}


def test_a_session_finishing_later_is_not_dropped_for_its_early_start() -> None:
    store = InMemoryStore(keep_finished=2)
    slow = AgentSession.start("slow", id=random_id(), at=1.0)
    store.save(slow)  # started first, still running while others finish
    for i in range(10):
        store.save(finished(f"q{i}"))
    slow.finish("completed", "ok", "done", at=1.0)
    store.save(slow)
    store.save(finished("last"))
    assert kept_questions(store) == {"slow", "last"}


def test_leased_sessions_are_never_dropped() -> None:
    store = InMemoryStore(keep_finished=2)
    held = finished("held")
    store.save(held)
    store.acquire(held.id, "owner-1")
    for i in range(20):
        store.save(finished(f"q{i}"))
    assert "held" in kept_questions(store)
    with pytest.raises(SessionBusy):
        store.save(held, owner="owner-2")
    store.release(held.id, "owner-2")  # not the holder: the lease stays
    store.save(finished("q20"))
    assert "held" in kept_questions(store)
    store.release(held.id, "owner-1")  # now it queues behind the finished ones kept so far
    assert kept_questions(store) == {"q20", "held"}
    store.save(finished("q21"))
    store.save(finished("q22"))
    assert kept_questions(store) == {"q21", "q22"}


def test_a_session_saved_while_leased_is_droppable_once_released() -> None:
    store = InMemoryStore(keep_finished=1)
    run = AgentSession.start("run", id=random_id(), at=1.0)
    store.save(run)
    store.acquire(run.id, "owner")
    run.finish("completed", "ok", "x", at=1.0)
    store.save(run, owner="owner")  # the runtime's last checkpoint, under the lease
    store.save(finished("other"))
    assert kept_questions(store) == {"run", "other"}
    store.release(run.id, "owner")
    assert kept_questions(store) == {"run"}


def test_a_status_changed_by_update_counts() -> None:
    store = InMemoryStore(keep_finished=1)
    paused = waiting("paused")
    store.save(paused)
    store.save(finished("done"))
    store.update(paused.id, lambda s: s.transition("cancelled", "by a person", at=1.0))
    assert kept_questions(store) == {"paused"}


def test_agent_runs_keep_only_the_last_finished_sessions() -> None:
    store = InMemoryStore(keep_finished=2)
    model = ScriptedModel([f"Thought: t\nFinal Answer: {i}" for i in range(5)])
    agent = Agent(model=model, store=store)
    results = [agent.run(f"q{i}") for i in range(5)]
    assert [r.status for r in results] == ["completed"] * 5
    assert kept_questions(store) == {"q3", "q4"}
    assert store.load(results[4].session_id).final_answer == "4"


def test_force_overrides_a_held_lease_and_the_old_holder_can_no_longer_save() -> None:
    store = InMemoryStore()
    session = waiting("held")
    store.save(session)
    store.acquire(session.id, "task-a")
    with pytest.raises(SessionBusy):
        store.update(session.id, lambda s: None)
    store.update(session.id, lambda s: s.transition("cancelled", "by a person", at=2.0),
                 force=True)
    assert store.load(session.id).status == "cancelled"
    with pytest.raises(SessionBusy, match="taken over"):
        store.save(session, owner="task-a")
    store.acquire(session.id, "task-b", force=True)

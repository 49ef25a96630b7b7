"""MemoryStore: the in-process default."""

from __future__ import annotations

import time

from miniagent.runtime.driver import random_id
from miniagent.session import AgentSession
from miniagent.store import MemoryStore


def test_memory_store_keeps_resumable_sessions_and_bounds_finished_ones() -> None:
    store = MemoryStore(keep_finished=5)
    waiting = AgentSession.start("waits", id=random_id(), at=time.time())
    waiting.transition("awaiting_approval", "x", at=time.time())
    store.save(waiting)
    for i in range(30):
        done = AgentSession.start(f"q{i}", id=random_id(), at=time.time())
        done.finish("completed", "ok", str(i), at=time.time())
        done.updated_at = float(i)
        store.save(done)
    kept = store.list(100)
    assert len(kept) <= 11
    assert store.load(waiting.id).status == "awaiting_approval"
    assert "q29" in {r.question for r in kept}

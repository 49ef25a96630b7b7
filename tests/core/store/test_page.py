"""Paged session listings: both stores give the same pages, filtered and in keyset order; the
SQLite one reads through an index, so a page costs the same at any depth."""

from __future__ import annotations

from pathlib import Path

import pytest

from miniagent import InMemoryStore, SQLiteStore
from miniagent.core.session import AgentSession
from miniagent.core.store.listing import SessionQuery
from miniagent.core.types import TokenUsage

QUESTIONS = ["Pay Alice", "pay bob 100%", "支付给小明", "under_score", "back\\slash", "Weather?"]


def fill(store: InMemoryStore | SQLiteStore) -> None:
    for n in range(30):
        session = AgentSession.start(QUESTIONS[n % len(QUESTIONS)], id=f"s{n:03d}", at=1000.0)
        session.updated_at = 1000.0 + n // 3  # ties: the id orders them
        if n % 4 == 0:
            session.transition("awaiting_approval", "waits", at=session.updated_at)
        session.add_usage(TokenUsage(prompt_tokens=n, completion_tokens=1))
        store.save(session)


def every_page(store: InMemoryStore | SQLiteStore, **filters: object) -> list[list[str]]:
    pages, after = [], None
    while True:
        rows = store.page(SessionQuery(after=after, limit=4, **filters))  # type: ignore[arg-type]
        if not rows:
            return pages
        pages.append([r.session_id for r in rows])
        after = (rows[-1].updated_at, rows[-1].session_id)


@pytest.mark.parametrize("filters", [
    {}, {"oldest_first": True}, {"status": "awaiting_approval"},
    {"status": "awaiting_approval", "oldest_first": True}, {"text": "pay"}, {"text": "100%"},
    {"text": "支付"}, {"text": "_"}, {"text": "\\"}, {"text": "S02"}, {"text": "nothing"},
])
def test_both_stores_page_alike(tmp_path: Path, filters: dict[str, object]) -> None:
    memory, sqlite = InMemoryStore(), SQLiteStore(tmp_path / "s.db")
    fill(memory)
    fill(sqlite)
    pages = every_page(sqlite, **filters)
    assert pages == every_page(memory, **filters)
    listed = [sid for page in pages for sid in page]
    assert len(listed) == len(set(listed))  # no row twice, across pages
    reference = sorted((s for s in memory.page(SessionQuery(limit=100))
                        if SessionQuery(**filters).follows(s)),  # type: ignore[arg-type]
                       key=lambda s: (s.updated_at, s.session_id),
                       reverse=not filters.get("oldest_first"))
    assert listed == [s.session_id for s in reference]


def test_the_page_has_the_tokens(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    fill(store)
    row = store.page(SessionQuery(text="s007", limit=1))[0]
    assert (row.session_id, row.tokens, row.steps) == ("s007", 8, 0)
    unknown = AgentSession.start("q", id="u", at=1.0)
    unknown.add_usage(TokenUsage.unknown(estimated=42))
    store.save(unknown)
    assert store.page(SessionQuery(text="u", oldest_first=True, limit=1))[0].tokens == 42


@pytest.mark.parametrize("status", [None, "awaiting_approval"])
def test_a_page_is_read_through_an_index(tmp_path: Path, status: str | None) -> None:
    from miniagent.core.store.sqlite import _page_filter

    store = SQLiteStore(tmp_path / "s.db")
    fill(store)
    where, params = _page_filter(SessionQuery(status=status, after=(1005.0, "s015")))
    plan = store._db.execute(f"EXPLAIN QUERY PLAN SELECT id FROM sessions {where} "
                             "ORDER BY updated_at DESC, id DESC LIMIT 50", params).fetchall()
    text = " ".join(str(row[-1]) for row in plan)
    assert "USING INDEX sessions_by" in text or "USING COVERING INDEX sessions_by" in text
    assert "TEMP B-TREE" not in text  # no sort of the table

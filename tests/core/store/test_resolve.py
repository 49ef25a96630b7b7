"""A session named by its id or a unique prefix of it, the same in every store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from miniagent.core.errors import SessionNotFound, UserError
from miniagent.core.session import AgentSession
from miniagent.core.store import InMemoryStore, SQLiteStore

IDS = ["3f2a90c1", "3f2a90c1ff", "3f2b0000", "77aa0001", "北京0001"]


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteStore | InMemoryStore]:
    chosen = SQLiteStore(tmp_path / "s.db") if request.param == "sqlite" else InMemoryStore()
    for session_id in IDS:
        chosen.save(AgentSession.start("q", id=session_id, at=time.time()))
    yield chosen
    if isinstance(chosen, SQLiteStore):
        chosen.close()


@pytest.mark.parametrize(("text", "expected"), [
    ("3f2b", "3f2b0000"), ("77aa0", "77aa0001"), ("北京00", "北京0001"),
    ("3f2a90c1", "3f2a90c1"),  # a whole id wins, though it begins another
    ("3f2a90c1f", "3f2a90c1ff"), ("3f2a90c1ff", "3f2a90c1ff"),
])
def test_a_unique_prefix_or_a_whole_id_names_its_session(
        store: SQLiteStore | InMemoryStore, text: str, expected: str) -> None:
    assert store.resolve(text) == expected


def test_an_ambiguous_prefix_is_refused_with_its_matches(store: SQLiteStore | InMemoryStore
                                                        ) -> None:
    with pytest.raises(UserError) as caught:
        store.resolve("3f2a")
    message = str(caught.value)
    assert "'3f2a' is ambiguous: 2 sessions" in message
    assert "(3f2a90c1, 3f2a90c1ff); give more characters" in message
    assert "3f2b0000" not in message


def test_too_short_or_unknown_is_refused(store: SQLiteStore | InMemoryStore) -> None:
    with pytest.raises(UserError, match="needs at least 4 characters"):
        store.resolve("3f")
    with pytest.raises(SessionNotFound, match="no session '3f2c'"):
        store.resolve("3f2c")
    with pytest.raises(SessionNotFound, match="no session 'zz'"):
        store.resolve("zz")


def test_many_matches_list_ten_and_say_there_are_more(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    for n in range(25):
        store.save(AgentSession.start("q", id=f"abcd{n:04}", at=time.time()))
    with pytest.raises(UserError) as caught:
        store.resolve("abcd")
    message = str(caught.value)
    assert "more than 10 sessions" in message
    assert message.count("abcd0") == 10 and "abcd0010" not in message
    assert store.resolve("abcd0017") == "abcd0017"

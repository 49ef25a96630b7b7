"""Memory on real SQLite files: what is found, in English and Chinese; what is kept apart,
survives, is refused; and that a deleted text leaves nothing behind in the index."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent import ConfigError, Memory, MemoryItem, StoreCorrupted, UserError
from miniagent.memory import MAX_ITEM_CHARS, MAX_K, MAX_QUERY_CHARS
from miniagent.memory.sqlite import SCHEMA_VERSION

FACTS = [
    "The user lives in Tokyo, near Shibuya station.",
    "The user's sister is a nurse in Boston.",
    "Deploys happen on Tuesdays after the planning meeting.",
    "用户住在东京，在一家咖啡店工作。",
    "项目的截止日期是三月十五日。",
    "她的猫叫小米，喜欢睡觉。",
    "周末我们去京都看红叶。",
]


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    store = Memory(tmp_path / "memory.db")
    for fact in FACTS:
        store.add(fact)
    yield store
    store.close()


def texts(items: list[MemoryItem]) -> list[str]:
    return [item.text for item in items]


def test_an_english_question_finds_its_fact_first(memory: Memory) -> None:
    found = memory.search("Where does the user live?")
    assert found[0].text == FACTS[0]
    assert memory.search("when are deploys planned")[0].text == FACTS[2]  # stems: planning
    assert all(a.score >= b.score for a, b in pairwise(found))  # type: ignore[operator]


@pytest.mark.parametrize(("query", "expected"), [
    ("东京", FACTS[3]),  # two characters: what the trigram tokenizer cannot match
    ("咖啡", FACTS[3]),
    ("截止日期是什么时候？", FACTS[4]),
    ("小米", FACTS[5]),
    ("京都", FACTS[6]),
])
def test_a_chinese_query_finds_its_fact_first(memory: Memory, query: str,
                                              expected: str) -> None:
    assert memory.search(query)[0].text == expected


def test_a_two_character_query_ranks_the_word_above_its_single_characters(
        memory: Memory) -> None:
    found = texts(memory.search("东京", k=5))
    assert found[0] == FACTS[3]
    assert FACTS[6] in found  # 京都 shares 京 only: found, but below
    assert found.index(FACTS[6]) > 0


def test_a_mixed_query_finds_both_languages(memory: Memory) -> None:
    found = texts(memory.search("Boston 咖啡", k=2))
    assert set(found) == {FACTS[1], FACTS[3]}


def test_a_query_of_only_stop_words_or_punctuation_finds_nothing(memory: Memory) -> None:
    assert memory.search("what is the") == []
    assert memory.search("?!… 。") == []
    assert memory.search("") == []


def test_items_keep_what_was_given(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as memory:
        item_id = memory.add("她喜欢喝乌龙茶。", namespace="alice",
                             metadata={"来源": "chat", "n": 1})
        item = memory.get(item_id)
        assert item is not None
        assert (item.id, item.text, item.namespace, item.metadata, item.score) == (
            item_id, "她喜欢喝乌龙茶。", "alice", {"来源": "chat", "n": 1}, None)
        assert item.created_at > 0
        assert memory.get("nope") is None
        assert memory.search("乌龙茶")[0].metadata == {"来源": "chat", "n": 1}


def test_list_is_newest_first_and_bounded(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as memory:
        ids = [memory.add(f"fact number {i}") for i in range(5)]
        assert [item.id for item in memory.list(limit=3)] == ids[::-1][:3]


def test_namespaces_are_kept_apart(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as memory:
        alice = memory.add("Alice's favourite colour is green.", namespace="alice")
        memory.add("Bob's favourite colour is red.", namespace="bob")
        memory.add("Bob likes green tea.", namespace="bob")
        assert [i.id for i in memory.search("green colour", namespace="alice")] == [alice]
        assert {i.namespace for i in memory.search("green", namespace="bob")} == {"bob"}
        assert len(memory.search("favourite colour")) == 2  # all namespaces
        assert [i.namespace for i in memory.list(namespace="alice")] == ["alice"]
        assert memory.clear("bob") == 2
        assert memory.clear("bob") == 0
        assert [i.id for i in memory.search("green")] == [alice]


def test_a_new_memory_on_the_same_file_finds_what_was_saved(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path) as memory:
        item_id = memory.add("用户的生日是五月三日。", metadata={"k": "v"})
    with Memory(path) as again:
        found = again.search("生日")
        assert [(i.id, i.metadata) for i in found] == [(item_id, {"k": "v"})]


def test_another_process_shares_the_file(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "m.db"
    with Memory(path) as memory:
        mine = memory.add("The parent process wrote this about Lisbon.")
        code = (
            "import sys, json; from miniagent import Memory\n"
            "m = Memory(sys.argv[1])\n"
            "found = [i.id for i in m.search('Lisbon')]\n"
            "new = m.add('子进程写下了这条关于里斯本的记忆。', namespace='child')\n"
            "print(json.dumps({'found': found, 'new': new}))\n"
        )
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, check=True, env=env, timeout=60)
        child = json.loads(out.stdout)
        assert child["found"] == [mine]
        assert [i.id for i in memory.search("里斯本", namespace="child")] == [child["new"]]


def fts_rows(path: Path) -> int:
    """Documents in the FTS index itself (its docsize table), not the items table."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0]


def raw_match(path: Path, term: str) -> list[int]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (f'"{term}"',))]


def test_delete_leaves_no_ghost_rows_in_the_index(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path) as memory:
        keep = memory.add("Keep: the office is in Lyon.")
        gone = memory.add("Secret: the vault code is 4711, 东京分店。")
        assert fts_rows(path) == 2 and raw_match(path, "4711")
        assert memory.delete(gone) is True
        assert memory.delete(gone) is False
        assert fts_rows(path) == 1
        assert raw_match(path, "4711") == [] and raw_match(path, "东京") == []
        assert memory.search("vault code 4711 东京") == []
        assert [i.id for i in memory.search("office Lyon")] == [keep]


def test_clear_leaves_no_ghost_rows_in_the_index(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path) as memory:
        for i in range(20):
            memory.add(f"scratch note {i} about zebras", namespace="scratch")
        memory.add("zebras are in the zoo", namespace="kept")
        assert memory.clear("scratch") == 20
        assert fts_rows(path) == 1
        assert len(raw_match(path, "zebra")) == 1
        assert [i.namespace for i in memory.search("zebras")] == ["kept"]


HOSTILE = [
    '"', '""', '"unbalanced', "AND", "OR", "NOT", "NEAR", "a AND", "OR b", "NEAR(a b)",
    "NEAR(a b, 2)", "*", "Tok*", "^Tokyo", "(", ")", "((Tokyo)", "-Tokyo", "Tokyo -",
    "terms:Tokyo", "memory_fts:x", "{terms}: x", "a + b", "'; DROP TABLE memory_items; --",
    "\x00", "\\", "东京\"*", "东 AND 京", "NOT 东京", ":", "^", "rank", "bm25(x)",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_a_hostile_query_is_never_an_fts_syntax_error(memory: Memory, query: str) -> None:
    memory.search(query)  # no exception
    assert FACTS[0] in texts(memory.search(query + " Tokyo", k=3))


@settings(max_examples=150, deadline=None)
@given(query=st.text(max_size=80))
def test_any_text_is_a_valid_query(query: str) -> None:
    with Memory() as memory:
        memory.add("The user lives in Tokyo. 用户住在东京。")
        memory.search(query)


def test_bounds_are_refused_with_a_clear_error(memory: Memory) -> None:
    with pytest.raises(UserError, match="8,001 characters; the most is 8,000"):
        memory.add("x" * (MAX_ITEM_CHARS + 1))
    memory.add("y" * MAX_ITEM_CHARS)  # the bound itself is fine
    with pytest.raises(UserError, match="the most is 2,000"):
        memory.search("q" * (MAX_QUERY_CHARS + 1))
    memory.search("东" * MAX_QUERY_CHARS)
    for k in (0, MAX_K + 1, -1, True, 2.0):
        with pytest.raises(UserError, match="k must be an integer from 1 to 100"):
            memory.search("Tokyo", k=k)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="empty"):
        memory.add("  \n ")
    with pytest.raises(UserError, match="namespace"):
        memory.add("fact", namespace="")
    with pytest.raises(UserError, match="limit"):
        memory.list(limit=0)


@pytest.mark.parametrize("metadata", [
    {"when": {1, 2}}, {"x": float("nan")}, {"f": print}, ["a list"], "text",
    {"big": "x" * 5000},
])
def test_metadata_must_be_a_small_json_object(memory: Memory, metadata: object) -> None:
    with pytest.raises(UserError, match="metadata"):
        memory.add("fact", metadata=metadata)  # type: ignore[arg-type]
    assert memory.search("fact") == []  # nothing half-saved


def test_the_file_and_its_folder_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "folder" / "memory.db"
        with Memory(path) as memory:
            memory.add("private fact")
            for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
                assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    finally:
        os.umask(old)


def test_a_damaged_file_is_reported_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is not a database, just some text\n" * 100)
    before = path.read_bytes()
    with pytest.raises(StoreCorrupted, match=f"memory file {path} cannot be read"):
        Memory(path)
    assert path.read_bytes() == before


def test_a_damaged_page_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Memory(path) as memory:
        for i in range(300):
            memory.add(f"fact {i} " + "padding " * 40)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[4096 * 3:4096 * 6] = b"\xff" * (4096 * 3)  # pages of the items or the index
    path.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupted, match="cannot be read"), Memory(path) as memory:
        memory.search("fact padding")
        memory.list(limit=300)


def test_another_programs_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE sessions (id TEXT)")
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="not a miniagent memory file"):
        Memory(path)
    assert path.read_bytes() == before


def test_a_file_from_a_newer_miniagent_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    Memory(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError, match="newer miniagent"):
        Memory(path)


def test_a_file_indexed_by_another_tokenizer_is_reindexed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path) as memory:
        item_id = memory.add("用户住在东京。")
    with sqlite3.connect(path) as db:  # as an older tokenizer would have left it
        db.execute("UPDATE memory_meta SET value = 'older' WHERE key = 'tokenizer'")
        db.execute("DROP TRIGGER memory_items_deleted")
        db.execute("UPDATE memory_items SET terms = 'unrelated words'")
        db.execute("INSERT INTO memory_fts (memory_fts) VALUES ('rebuild')")
    with Memory(path) as memory:
        assert [i.id for i in memory.search("东京")] == [item_id]
        assert memory.search("unrelated") == []
        assert memory.delete(item_id) and fts_rows(path) == 0  # the trigger is back


def test_a_closed_memory_says_so(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "m.db")
    memory.close()
    with pytest.raises(UserError, match="was closed"):
        memory.search("x")


def test_in_memory_by_default() -> None:
    with Memory() as memory:
        item_id = memory.add("ephemeral")
        assert memory.path is None and memory.get(item_id) is not None


async def test_the_async_twins(tmp_path: Path) -> None:
    import asyncio

    with Memory(tmp_path / "m.db") as memory:
        ids = await asyncio.gather(*(memory.aadd(f"并发写入的第{i}条记忆", namespace="a")
                                     for i in range(10)))
        assert len(set(ids)) == 10
        assert len(await memory.asearch("并发写入", k=20)) == 10
        assert len(await memory.alist(namespace="a", limit=20)) == 10
        assert (await memory.aget(ids[0])) is not None
        assert await memory.adelete(ids[0]) is True
        assert await memory.aclear("a") == 9


def test_importing_miniagent_does_not_load_sqlite() -> None:
    code = "import sys, miniagent, miniagent.memory; print('sqlite3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"

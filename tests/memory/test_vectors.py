"""Semantic and hybrid search: an embedder finds what shares no word with the query, and RRF
puts what both lists agree on first."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from miniagent import Memory, UserError
from miniagent.memory.vectors import RRF_K, fuse, pack, top_cosine, unpack
from miniagent.testing.embeddings import trigram_embedder

CONCEPTS = {
    "food": ("ramen", "sushi", "eat", "dinner", "hungry", "拉面", "吃"),
    "travel": ("flight", "trip", "airport", "travel", "journey", "飞机", "旅行"),
    "pets": ("cat", "dog", "kitten", "puppy", "pet", "猫", "宠物"),
}


def concept_embed(texts: list[str]) -> list[list[float]]:
    """A tiny embedding model that knows three topics and their words, synonyms included."""
    return [[float(sum(word in text.lower() for word in words)) + 0.01
             for words in CONCEPTS.values()] for text in texts]


def test_hybrid_search_finds_a_paraphrase_full_text_misses(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embed=concept_embed) as memory:
        ramen = memory.add("She loves ramen from the shop on Fifth Street.")
        memory.add("His flight to Oslo leaves Monday.")
        memory.add("The kitten sleeps on the sofa.")
        found = memory.search("what should we cook for dinner", k=1)
        assert [i.id for i in found] == [ramen]
        assert found[0].score == pytest.approx(1 / (RRF_K + 1))
    with Memory(path) as lexical:  # the same file without an embedder: full text only
        assert lexical.search("what should we cook for dinner") == []


def test_an_item_first_in_both_lists_outranks_one_first_in_one(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embed=concept_embed) as memory:
        both = memory.add("Our puppy Rex needs a walk.")  # "puppy": lexical and pets
        memory.add("A pet kitten and a dog.")  # pets only, more strongly
        memory.add("Puppy is also the name of a ramen bar.")  # lexical, but food
        found = memory.search("puppy", k=3)
        assert found[0].id == both
        assert found[0].score == pytest.approx(2 / (RRF_K + 1), rel=0.05)
        assert len(found) == 3


def test_chinese_paraphrase_through_the_embedder(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embed=concept_embed) as memory:
        trip = memory.add("下个月坐飞机去成都。")
        memory.add("她每天都吃拉面。")
        assert memory.search("旅行计划", k=1)[0].id == trip


def test_items_without_vectors_are_still_found_by_full_text(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path) as plain:
        old = plain.add("Added before the embedder: the wifi password is on the fridge.")
    with Memory(path, embed=concept_embed) as memory:
        memory.add("She loves ramen.")
        assert old in [i.id for i in memory.search("wifi password")]


def test_deleting_an_item_deletes_its_vector(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embed=concept_embed) as memory:
        item_id = memory.add("The cat is called Miso.")
        memory.add("ramen", namespace="other")
        memory.delete(item_id)
        memory.clear("other")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 0


def test_namespaces_hold_in_the_semantic_list(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embed=concept_embed) as memory:
        memory.add("The kitten sleeps.", namespace="a")
        dog = memory.add("A dog barks.", namespace="b")
        assert [i.id for i in memory.search("pets", namespace="b")] == [dog]


def test_an_embedder_of_another_length_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embed=concept_embed) as memory:
        memory.add("ramen")
    with Memory(path, embed=trigram_embedder(16)) as other:
        with pytest.raises(UserError, match=r"returned 16 numbers, but the vectors .* have 3"):
            other.add("sushi")
        with pytest.raises(UserError, match="another embedding model"):
            other.search("sushi")
        assert [i.text for i in Memory(path).search("ramen")] == ["ramen"]  # nothing half-saved


@pytest.mark.parametrize(("bad", "message"), [
    (lambda texts: [], "one vector per text"),
    (lambda texts: [[1.0, float("nan")]], "NaN"),
    (lambda texts: [["a", "b"]], "only numbers"),
    (lambda texts: [[]], "1 to 8192 numbers"),
    (lambda texts: "vector", "one vector per text"),
])
def test_an_embedder_returning_something_else_is_a_clear_error(bad: object,
                                                               message: str) -> None:
    with Memory(embed=bad) as memory:  # type: ignore[arg-type]
        with pytest.raises(UserError, match=message):
            memory.add("text")
        assert memory.list() == []


def test_fuse_and_cosine() -> None:
    assert fuse([["a", "b"], ["b", "c"]])[0][0] == "b"
    assert fuse([["a"], []]) == [("a", 1 / (RRF_K + 1))]
    rows = [(1, pack([1.0, 0.0])), (2, pack([0.6, 0.8])), (3, pack([0.0, 0.0]))]
    assert [key for _, key in top_cosine([0.0, 2.0], rows, 2)] == [2, 1]
    assert list(unpack(pack([0.0, 0.0]))) == [0.0, 0.0]

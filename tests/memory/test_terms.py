"""How text is indexed and how a query becomes an FTS5 expression that is always valid."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent.memory.terms import MAX_QUERY_TERMS, fingerprint, index_terms, match_query


def test_chinese_is_indexed_as_characters_and_pairs() -> None:
    assert index_terms("东京咖啡") == "东 京 咖 啡 东京 京咖 咖啡"
    assert match_query("东京") == '"东" OR "京" OR "东京"'


def test_a_long_query_keeps_its_words_and_pairs_first() -> None:
    query = "".join(chr(0x4E00 + i) for i in range(500))  # 500 distinct characters
    expression = match_query(query)
    assert expression is not None
    kept = expression.split(" OR ")
    assert len(kept) == MAX_QUERY_TERMS
    assert all(len(term) == 4 for term in kept)  # '"xy"': pairs, not single characters


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=200))
def test_every_expression_is_valid_fts5(query: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(terms)")
    db.execute("INSERT INTO t (terms) VALUES (?)", (index_terms("some text 东京"),))
    expression = match_query(query)
    if expression is not None:
        db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_the_fingerprint_is_stable_within_a_version() -> None:
    assert fingerprint() == fingerprint() and len(fingerprint()) == 16

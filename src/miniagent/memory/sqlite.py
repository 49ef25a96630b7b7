"""Memory: long-term memory in one SQLite file, searched by BM25 (FTS5) and, optionally, by
embeddings.

The file follows the session store's conventions (:mod:`miniagent.core.store.sqlite`): WAL mode
and a 10 s busy timeout, so that several processes can share it; the file, its folder and its
WAL and SHM files private to the user (memories are about people); every write one
transaction. A file that is not a memory file (another program's database) is refused and a
damaged one is reported, both left untouched. A memory file is marked by SQLite's
``application_id`` and carries its schema version in ``user_version``.

Tables: ``memory_items`` holds each item and its index terms (see
:mod:`miniagent.memory.terms`); ``memory_fts`` is an FTS5 index with external content,
kept in step with the items by triggers, so that deleting an item removes its terms from the
index in the same transaction; ``memory_vectors`` holds the embeddings, when there is an
embedder (see :mod:`miniagent.memory.vectors`).

Credentials are never stored: a text and its metadata are redacted on the way in, with the
rules of the traces (:class:`~miniagent.core.trace.redact.Redactor`: the values of
credential-named environment variables, ``password: ...``, ``Bearer ...``, ``sk-...``, and the
secrets given to :class:`Memory`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from miniagent._internal.aio import run_in_daemon_thread
from miniagent._internal.files import FILE_MODE, private_dir
from miniagent.core.errors import ConfigError, SessionError, StoreCorrupted, UserError
from miniagent.core.store.base import random_id
from miniagent.core.store.sqlite import immediate_transaction, read_snapshot
from miniagent.core.trace.redact import Redactor

if TYPE_CHECKING:
    from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.memory import terms
from miniagent.memory.items import (
    MAX_K,
    MAX_LIST,
    MemoryItem,
    checked_count,
    checked_namespace,
    checked_query,
    checked_text,
    decoded_metadata,
    encoded_metadata,
)
from miniagent.memory.vectors import checked_vectors, fuse, pack, top_cosine

__all__ = ["APPLICATION_ID", "CANDIDATES", "SCHEMA_VERSION", "Embedder", "Memory"]

Embedder = Callable[[list[str]], Sequence[Sequence[float]]]
"""A sync function from texts to their embeddings, one per text, each of the same length."""

APPLICATION_ID = 0x4D414D31  # "MAM1"
"""SQLite's ``application_id`` of a memory file."""

SCHEMA_VERSION = 1

CANDIDATES = 50
"""How deep each ranked list goes before a hybrid search fuses them (at least twice ``k``)."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS memory_items (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        created_at REAL NOT NULL,
        terms TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memory_items_by_namespace ON memory_items (namespace, seq)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(terms, content='memory_items', "
    "content_rowid='seq', tokenize='unicode61')",
    "CREATE TABLE IF NOT EXISTS memory_vectors (seq INTEGER PRIMARY KEY, vector BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TRIGGER IF NOT EXISTS memory_items_added AFTER INSERT ON memory_items BEGIN
        INSERT INTO memory_fts (rowid, terms) VALUES (new.seq, new.terms);
    END""",
    """CREATE TRIGGER IF NOT EXISTS memory_items_deleted AFTER DELETE ON memory_items BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, terms) VALUES ('delete', old.seq, old.terms);
        DELETE FROM memory_vectors WHERE seq = old.seq;
    END""",
)

_COLUMNS = "i.id, i.namespace, i.text, i.metadata, i.created_at"
_Items = list[MemoryItem]  # (``Memory.list`` hides the builtin in the class body)
_Vector = list[float]


class Memory:
    """Long-term memory: texts saved in namespaces, found again by a search.

    Args:
        path: The SQLite file, created (with its folder, both private to the user) when
            missing; any number of processes may share it. ``None``: in memory, gone when
            closed.
        embed: A function from a list of texts to their embeddings (``list[list[float]]``),
            for semantic search beside the full-text one. It is sync, and called in the
            thread the method runs in: a worker thread for the ``a``-methods, so from async
            code use those. Every item added gets a vector; items added without an embedder
            are found by full-text search only. See :func:`~miniagent.memory.endpoint_embedder`.
        secrets: Values never to store (an API key), replaced by ``[REDACTED]`` in what is
            added, as are credential-named environment variables' values and text that looks
            like a credential (see the module docstring).

    Raises:
        ConfigError: The file cannot be opened or written, is another program's database,
            or was made by a newer miniagent.
        StoreCorrupted: The file is damaged (it is left untouched).

    Examples:
        >>> memory = Memory()
        >>> first = memory.add("The user lives in Tokyo and drinks oolong tea.")
        >>> _ = memory.add("用户在东京工作，喜欢喝咖啡。", namespace="zh")
        >>> [item.id == first for item in memory.search("Where does the user live?")]
        [True]
        >>> memory.search("咖啡")[0].namespace
        'zh'
        >>> memory.delete(first), memory.search("Tokyo")
        (True, [])
        >>> memory.close()
    """

    def __init__(self, path: str | Path | None = None, *, embed: Embedder | None = None,
                 secrets: Iterable[str] = ()) -> None:
        self.path = None if path is None or str(path) == ":memory:" else Path(path)
        self.embed = embed
        self.redact = Redactor(secrets)
        """What :meth:`add` stores goes through it first (``redact.add(value)``: one more)."""
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from None
        # a row another program wrote may hold invalid UTF-8: read it, never crash on it
        self._db.text_factory = lambda raw: raw.decode("utf-8", "replace")
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    def __repr__(self) -> str:
        return f"Memory({str(self.path) if self.path else None!r})"

    def tool_source(self, namespace: str = "default", *, secrets: Iterable[str] = ()
                    ) -> ToolRegistry:
        """Its ``remember`` and ``recall`` tools over ``namespace``, as one tool source: what
        ``Agent(memory=...)`` adds to the agent's tools (see
        :func:`~miniagent.memory.tools.memory_tools`; ``secrets``: the agent's credentials,
        never stored nor shown)."""
        from miniagent.core.tools.toolbox import ToolRegistry
        from miniagent.memory.tools import memory_tools

        return ToolRegistry(memory_tools(self, namespace, secrets=secrets))

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- opening -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.path is None:
            return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        private_dir(self.path.parent)
        _private_file(self.path)  # SQLite gives the WAL and SHM files the same mode
        return sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                               check_same_thread=False)

    def _open(self) -> None:
        """Check the file before changing anything in it (WAL mode rewrites its header),
        then make a new file a memory file, or check an existing one again, in one
        transaction (another process may be making it at the same time)."""
        try:
            self._check_kind(self._db)
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from None
        with self._transaction() as db:
            if self._check_kind(db):
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._prepare(db)

    def _check_kind(self, db: sqlite3.Connection) -> bool:
        """Whether the file is new (empty); raise unless it is new or a memory file that
        this miniagent can read."""
        application = db.execute("PRAGMA application_id").fetchone()[0]
        if application == APPLICATION_ID:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ConfigError(f"{self._where()} was made by a newer miniagent (memory "
                                  f"schema {version}, this one reads {SCHEMA_VERSION}); "
                                  "upgrade miniagent")
            return False
        if application != 0 or db.execute("SELECT 1 FROM sqlite_master").fetchone():
            raise ConfigError(f"{self._where()} is not a miniagent memory file (it is another "
                              "program's SQLite database); it was left untouched: choose "
                              "another file")
        return True

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Create what is missing of the schema; reindex a file indexed by another tokenizer."""
        for statement in _SCHEMA:
            db.execute(statement)
        indexed_by = _meta(db, "tokenizer")
        if indexed_by != terms.fingerprint():
            if indexed_by is not None:
                _reindex(db)
            _set_meta(db, "tokenizer", terms.fingerprint())

    def _where(self) -> str:
        return f"memory file {self.path}" if self.path else "the memory held in this process"

    def _failure(self, exc: sqlite3.DatabaseError) -> Exception:
        """What a failing SQLite call means, in a person's terms."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            return SessionError(f"{self._where()} is locked by another process (waited 10 s); "
                                "try again")
        if "readonly" in text:
            return ConfigError(f"{self._where()} cannot be written ({exc}); check the "
                               "permissions of the file and its folder")
        if "unable to open" in text:
            return ConfigError(f"{self._where()} cannot be opened ({exc}); choose another file")
        return StoreCorrupted(f"{self._where()} cannot be read ({exc}); it was left untouched. "
                              "Move it aside to start a new memory file.")

    @contextmanager
    def _transaction(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """The open file inside one transaction: a write (``BEGIN IMMEDIATE``), or one
        snapshot of the file for the reads inside."""
        begin = immediate_transaction if write else read_snapshot
        with self._lock:
            self._check_open()
            with begin(self._db, self._failure) as db:
                yield db

    def _check_open(self) -> None:
        if self._closed:
            raise UserError(f"{self._where()} was closed")

    # -- writing -----------------------------------------------------------------------

    def add(self, text: str, namespace: str = "default",
            metadata: dict[str, Any] | None = None) -> str:
        """Save ``text`` and return its id; credentials in it and in ``metadata`` are
        replaced by ``[REDACTED]`` first (see the module docstring).

        Args:
            text: What to remember, up to :data:`~miniagent.memory.MAX_ITEM_CHARS`.
            namespace: The group it belongs to; searches can keep to one.
            metadata: A JSON object kept with it (source, tags, ...).

        Raises:
            UserError: An empty or too long text, a bad namespace, metadata that is not a
                JSON object (or is too long), or an embedder that returns something else
                than one vector of the file's length.
        """
        text = self.redact.text(checked_text(text))
        namespace = checked_namespace(namespace)
        encoded = encoded_metadata(self.redact(metadata))
        indexed = terms.index_terms(text)
        vector = self._embedded(text) if self.embed is not None else None
        item_id = random_id()
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO memory_items (id, namespace, text, metadata, created_at, terms) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (item_id, namespace, text, encoded, time.time(), indexed))
            if vector is not None:
                self._check_dimensions(db, len(vector))
                db.execute("INSERT INTO memory_vectors (seq, vector) VALUES (?, ?)",
                           (cursor.lastrowid, pack(vector)))
        return item_id

    def delete(self, item_id: str) -> bool:
        """Delete one item (its index terms and vector too); whether it was there."""
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM memory_items WHERE id = ?", (str(item_id),))
        return cursor.rowcount > 0

    def clear(self, namespace: str) -> int:
        """Delete every item of ``namespace``; how many there were."""
        namespace = checked_namespace(namespace)
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM memory_items WHERE namespace = ?", (namespace,))
        return cursor.rowcount

    # -- reading -----------------------------------------------------------------------

    def get(self, item_id: str) -> MemoryItem | None:
        """The item with this id, or ``None``."""
        with self._transaction(write=False) as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM memory_items i WHERE i.id = ?",
                             (str(item_id),)).fetchone()
        return None if row is None else _item(row)

    def list(self, namespace: str | None = None, limit: int = 50) -> _Items:
        """The latest items (of ``namespace``, else of all), newest first."""
        limit = checked_count(limit, "limit", MAX_LIST)
        condition, params = _in_namespace(namespace)
        with self._transaction(write=False) as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM memory_items i WHERE {condition} "
                              "ORDER BY i.seq DESC LIMIT ?", (*params, limit)).fetchall()
        return [_item(row) for row in rows]

    def search(self, query: str, k: int = 5, namespace: str | None = None) -> _Items:
        """The ``k`` items that best match ``query``, best first.

        Without an embedder, full-text search: items sharing terms with the query, ranked by
        BM25 (``score`` is minus FTS5's ``bm25()``). With one, hybrid search: the BM25 list
        and the list of items by cosine similarity to the query's embedding, each
        :data:`CANDIDATES` deep, fused by reciprocal rank (``score`` is the fused score, see
        :mod:`miniagent.memory.vectors`). A query with no terms (only stop words or
        punctuation) finds nothing by full text.

        Args:
            query: What to look for, up to :data:`~miniagent.memory.MAX_QUERY_CHARS`; any
                text (it is never read as FTS5 syntax).
            k: How many items at most, 1 to :data:`~miniagent.memory.MAX_K`.
            namespace: Search this namespace only; ``None``: all of them.
        """
        query, k = checked_query(query), checked_count(k, "k", MAX_K)
        condition, params = _in_namespace(namespace)
        expression = terms.match_query(query)
        vector = self._embedded(query) if self.embed is not None else None
        depth = max(CANDIDATES, 2 * k) if vector is not None else k
        with self._transaction(write=False) as db:
            lexical = [] if expression is None else db.execute(
                f"SELECT i.seq, -bm25(memory_fts), {_COLUMNS} FROM memory_fts "
                f"JOIN memory_items i ON i.seq = memory_fts.rowid "
                f"WHERE memory_fts MATCH ? AND {condition} ORDER BY bm25(memory_fts) LIMIT ?",
                (expression, *params, depth)).fetchall()
            if vector is None:
                return [_item(row[2:], row[1]) for row in lexical]
            self._check_dimensions(db, len(vector), writing=False)
            rows = db.execute(
                "SELECT v.seq, v.vector FROM memory_vectors v" if namespace is None else
                "SELECT v.seq, v.vector FROM memory_vectors v JOIN memory_items i "
                f"ON i.seq = v.seq WHERE {condition}", params)
            nearest = [seq for _, seq in top_cosine(vector, rows, depth)]
            found = {row[0]: row[2:] for row in lexical}
            missing = [seq for seq in nearest if seq not in found]
            found.update(_rows_by_seq(db, missing))
        fused = fuse([[row[0] for row in lexical], nearest])[:k]
        return [_item(found[seq], score) for seq, score in fused if seq in found]

    def close(self) -> None:
        """Close the file (a memory held in this process is then gone)."""
        with self._lock:
            self._closed = True
            self._db.close()

    # -- the same, from async code (each runs on a worker thread) ------------------------

    async def aadd(self, text: str, namespace: str = "default",
                   metadata: dict[str, Any] | None = None) -> str:
        """:meth:`add` on a worker thread."""
        return await run_in_daemon_thread(self.add, text, namespace, metadata)

    async def asearch(self, query: str, k: int = 5,
                      namespace: str | None = None) -> _Items:
        """:meth:`search` on a worker thread."""
        return await run_in_daemon_thread(self.search, query, k, namespace)

    async def alist(self, namespace: str | None = None, limit: int = 50) -> _Items:
        """:meth:`list` on a worker thread."""
        return await run_in_daemon_thread(self.list, namespace, limit)

    async def aget(self, item_id: str) -> MemoryItem | None:
        """:meth:`get` on a worker thread."""
        return await run_in_daemon_thread(self.get, item_id)

    async def adelete(self, item_id: str) -> bool:
        """:meth:`delete` on a worker thread."""
        return await run_in_daemon_thread(self.delete, item_id)

    async def aclear(self, namespace: str) -> int:
        """:meth:`clear` on a worker thread."""
        return await run_in_daemon_thread(self.clear, namespace)

    # -- embeddings --------------------------------------------------------------------

    def _embedded(self, text: str) -> _Vector:
        assert self.embed is not None
        return checked_vectors(self.embed([text]), 1)[0]

    def _check_dimensions(self, db: sqlite3.Connection, size: int, *,
                          writing: bool = True) -> None:
        """Every vector of a file has one length: the first one stored sets it."""
        stored = _meta(db, "dimensions")
        if stored is None:
            if writing:
                _set_meta(db, "dimensions", str(size))
        elif int(stored) != size:
            raise UserError(f"the embedder returned {size} numbers, but the vectors in "
                            f"{self._where()} have {stored}: they were made by another "
                            "embedding model (use that one, or another file)")


def _in_namespace(namespace: str | None) -> tuple[str, tuple[str, ...]]:
    """An SQL condition on the items ``i`` keeping to ``namespace``, and its parameters."""
    if namespace is None:
        return "1", ()
    return "i.namespace = ?", (checked_namespace(namespace),)


def _rows_by_seq(db: sqlite3.Connection, seqs: list[int]) -> dict[int, tuple[Any, ...]]:
    if not seqs:
        return {}
    marks = ",".join("?" * len(seqs))
    rows = db.execute(f"SELECT i.seq, {_COLUMNS} FROM memory_items i WHERE i.seq IN ({marks})",
                      seqs).fetchall()
    return {row[0]: row[1:] for row in rows}


def _item(row: Sequence[Any], score: float | None = None) -> MemoryItem:
    item_id, namespace, text, metadata, created_at = row
    return MemoryItem(id=item_id, namespace=namespace, text=text,
                      metadata=decoded_metadata(metadata), created_at=created_at, score=score)


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM memory_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute("INSERT INTO memory_meta (key, value) VALUES (?, ?) ON CONFLICT(key) "
               "DO UPDATE SET value = excluded.value", (key, value))


def _reindex(db: sqlite3.Connection) -> None:
    """Index every item again with today's tokenizer (the file was indexed by another)."""
    rows = db.execute("SELECT seq, text FROM memory_items").fetchall()
    db.executemany("UPDATE memory_items SET terms = ? WHERE seq = ?",
                   [(terms.index_terms(text), seq) for seq, text in rows])
    db.execute("INSERT INTO memory_fts (memory_fts) VALUES ('rebuild')")


def _private_file(path: Path) -> None:
    """Create an empty database file readable only by its owner, unless it exists."""
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))

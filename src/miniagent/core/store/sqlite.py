"""SQLiteStore: the embedded default checkpoint store (one file, WAL mode).

Each session is one row: a few columns for listing and the whole session as JSON, and one row
of a small side table (``revisions``: a count of its saves and its counted tokens), so that a
listing or a page following the session never reads the JSON, nor steps over it (SQLite walks
a large value's pages to reach the columns after it). A save is a single transaction, so a
crash at any point leaves the last complete checkpoint readable. A damaged row makes only that
session unreadable; a damaged file is reported and never overwritten. A lock another process
holds for longer than ``BUSY_SECONDS`` is :class:`~miniagent.core.errors.SessionBusy` (try again),
never taken for damage. The file, its folder and
its WAL and SHM files are private to the user: they hold whole transcripts.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any

from miniagent._internal.wording import counted
from miniagent.core.errors import (
    SessionBusy,
    SessionError,
    SessionNotFound,
    StoreCorrupted,
    UserError,
)
from miniagent.core.session import AgentSession, storable
from miniagent.core.store import decision_door as doors
from miniagent.core.store.base import (
    LEASE_SECONDS,
    SHOWN_MATCHES,
    LeaseRenewer,
    held_here,
    interrupted_run,
    lease_alive,
    resolve_id,
)
from miniagent.core.store.listing import SessionQuery, SessionRevision, SessionSummary, stamp_of
from miniagent.core.types import CallRecord

_Summaries = list[SessionSummary]  # (the class's own ``list`` hides the builtin)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    question TEXT NOT NULL,
    steps INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL,
    lease_owner TEXT,
    lease_until REAL
)
"""

_REVISIONS = """
CREATE TABLE IF NOT EXISTS revisions (
    session_id TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    tokens INTEGER
) WITHOUT ROWID
"""
"""Each session's count of saves and counted tokens, written with the session."""

_CALLS = """
CREATE TABLE IF NOT EXISTS calls (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
)
"""
"""Calls saved one by one since their session's last full save (see ``save_call``)."""

_INDEXES = (
    "CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at, id)",
    "CREATE INDEX IF NOT EXISTS sessions_by_status ON sessions (status, updated_at, id)",
)
"""What a page of the listing is read through (``page``): the newest (or oldest) rows of a
status, from a keyset, without sorting the table."""

_TOKENS = ("CASE WHEN NOT json_valid(data) THEN NULL "
           "WHEN json_extract(data, '$.usage.prompt_tokens') IS NULL "
           "OR json_extract(data, '$.usage.completion_tokens') IS NULL "
           "THEN json_extract(data, '$.usage.estimated_tokens') "
           "ELSE json_extract(data, '$.usage.prompt_tokens') "
           "+ json_extract(data, '$.usage.completion_tokens') END")
"""A row's counted tokens (``TokenUsage.counted_tokens``) read from its JSON: what a row saved
before the ``revisions`` table lists (a damaged row has none)."""

_LISTED_TOKENS = f"COALESCE(revisions.tokens, {_TOKENS})"
"""A listed row's tokens: from its revisions row, else (saved by an older miniagent and not
since) from its JSON."""

_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6
"""SQLite's primary result codes for a lock another connection holds."""

_Leases = list[tuple[str, str]]  # (session id, owner)


def default_store_path() -> Path:
    """``MINIAGENT_STORE``, else ``$XDG_DATA_HOME/miniagent/sessions.db`` (~/.local/share)."""
    explicit = os.environ.get("MINIAGENT_STORE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "miniagent" / "sessions.db"


class SQLiteStore:
    """Sessions in one SQLite file. Safe to share between processes.

    Args:
        path: The database file; created (with its folder, both private to the user) when
            missing.
        readonly: Only read: nothing is created or written, so a store in a folder or file the
            user may not write can still be listed and shown. Writing methods raise UserError;
            a missing file reads as an empty store.
    """

    RENEW_SECONDS = LEASE_SECONDS / 4
    """How often the leases this store holds are renewed while their runs go on."""

    BUSY_SECONDS = 10.0
    """How long a read or write waits for another process's lock on the file before it gives
    up with :class:`~miniagent.core.errors.SessionBusy`."""

    def __init__(self, path: str | Path | None = None, *, readonly: bool = False) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.readonly = readonly
        self._lock = threading.Lock()
        self._renewer = LeaseRenewer(self._renew, lambda: self.RENEW_SECONDS)
        try:
            self._db = self._open_readonly() if readonly else self._open()
        except sqlite3.DatabaseError as exc:
            if not readonly and not _can_write(self.path):
                raise self._unwritable(exc) from None
            raise self._damaged(exc) from None
        # a row written by another program may hold invalid UTF-8: read it, never crash on it
        self._db.text_factory = lambda raw: raw.decode("utf-8", "replace")
        # a store made before the revisions table, opened read-only: read around it
        self._revisions = _has_table(self._db, "revisions")

    def _open(self) -> sqlite3.Connection:
        _private_folder(self.path.parent)
        _private_file(self.path)  # SQLite gives the WAL and SHM files the same mode
        db = sqlite3.connect(self.path, timeout=self.BUSY_SECONDS, isolation_level=None,
                             check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(_SCHEMA)
        db.execute(_CALLS)
        db.execute(doors.SCHEMA)
        for index in _INDEXES:
            db.execute(index)
        _add_revisions(db)
        return db

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.exists():
            _no_file_in_the_way(self.path)
            return _empty_store()  # nothing saved yet: an empty listing, not an error
        uri = self.path.absolute().as_uri() + "?mode=ro"
        db = _connect_readonly(uri, self.BUSY_SECONDS)
        try:
            found = _has_table(db, "sessions")
        except sqlite3.OperationalError:
            # a WAL-mode file without its -shm cannot be opened read-only in a folder we may
            # not write; no writer has it open then (it would have made the -shm), so it is
            # read as an immutable file
            db.close()
            db = _connect_readonly(uri + "&immutable=1", self.BUSY_SECONDS)
            found = _has_table(db, "sessions")
        if not found:
            db.close()
            return _empty_store()
        return db

    def _unwritable(self, exc: Exception) -> SessionError:
        return SessionError(
            f"session store {self.path} cannot be written ({exc}); check the permissions of "
            "the file and its folder ('miniagent sessions list' and 'show' can still read it)")

    def _damaged(self, exc: Exception) -> SessionError:
        """What a failing SQLite call means: only an error no other cause explains is damage."""
        if _is_busy(exc):  # another process held its lock past our wait: nothing is wrong
            return SessionBusy(
                f"session store {self.path} is busy: another process held it locked for over "
                f"{self.BUSY_SECONDS:g} s ({exc}); nothing was lost, try again in a moment")
        if "readonly" in str(exc):
            return self._unwritable(exc)
        if "unable to open" in str(exc):  # a folder, /proc, a missing device: not corruption
            return SessionError(f"session store {self.path} cannot be opened ({exc}); choose "
                                "another file with --store or MINIAGENT_STORE")
        return StoreCorrupted(
            f"session store {self.path} cannot be read ({exc}); it was left untouched. "
            "Move it aside (or point MINIAGENT_STORE elsewhere) to start a new store."
        )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise UserError(f"session store {self.path} was opened read-only")
        with self._lock, immediate_transaction(self._db, self._damaged) as db:
            yield db

    def save(self, session: AgentSession, *, owner: str | None = None) -> None:
        with self._transaction() as db:
            if owner is not None:
                self._check_lease(db, session.id, owner, holding=True)
            self._write(db, session)
            if owner is not None:
                _execute(db, "UPDATE sessions SET lease_until = ? WHERE id = ? AND lease_owner = ?",
                         time.time() + LEASE_SECONDS, session.id, owner)

    def save_call(self, session: AgentSession, record: CallRecord, *,
                  owner: str | None = None) -> None:
        """Save one completed call in a row of its own: the cost follows the call, not the
        session (a whole-session write per call made a step of 1,000 calls quadratic). The
        lease is checked but not refreshed here (refreshing rewrites the session's row); the
        store's renewal keeps it."""
        data = json.dumps(asdict(record), ensure_ascii=False, separators=(",", ":"))
        with self._transaction() as db:
            if owner is not None:
                self._check_lease(db, session.id, owner, holding=True)
            _execute(db, "INSERT OR REPLACE INTO calls (session_id, call_id, step, data) "
                     "VALUES (?, ?, ?, ?)", session.id, record.call.id, len(session.steps), data)

    @staticmethod
    def _write(db: sqlite3.Connection, session: AgentSession) -> None:
        """Write the whole session; the calls saved one by one are in it now."""
        data = json.dumps(session.to_dict(), ensure_ascii=False, separators=(",", ":"))
        _execute(db, "DELETE FROM calls WHERE session_id = ?", session.id)
        _execute(
            db,
            "INSERT INTO sessions (id, status, question, steps, created_at, updated_at, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET status = excluded.status,"
            " steps = excluded.steps, updated_at = excluded.updated_at, data = excluded.data",
            session.id, session.status, session.question, len(session.steps),
            session.created_at, session.updated_at, data,
        )
        _execute(db, "INSERT INTO revisions (session_id, revision, tokens) VALUES (?, 1, ?) "
                 "ON CONFLICT(session_id) DO UPDATE SET revision = revision + 1, "
                 "tokens = excluded.tokens", session.id, session.usage.counted_tokens)

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction, under the lock: what is read in it
        (a row and its saved calls) is as of one moment. A database error becomes
        :meth:`_damaged`'s."""
        with self._lock, read_snapshot(self._db, self._damaged) as db:
            yield db

    def load(self, session_id: str) -> AgentSession:
        with self._snapshot() as db:
            row = _execute(db, "SELECT data FROM sessions WHERE id = ?", session_id).fetchone()
            calls = self._saved_calls(db, session_id) if row else []
        if row is None:
            raise SessionNotFound(f"no session {storable(session_id)!r} in {self.path}")
        return _with_calls(_decode(session_id, row[0]), calls)

    @staticmethod
    def _saved_calls(db: sqlite3.Connection, session_id: str) -> list[tuple[int, str]]:
        """(step, data) of calls saved since the session's last full save."""
        try:
            return _execute(db, "SELECT step, data FROM calls WHERE session_id = ?",
                            session_id).fetchall()
        except sqlite3.OperationalError:  # a store made before the calls table, read-only
            return []

    def revision(self, session_id: str) -> SessionRevision:
        """Where the saved session stands, read from its first columns, its revision and its
        calls' index (never its JSON): what a page that follows it compares (see
        :class:`~miniagent.core.store.listing.SessionRevision`).

        Raises:
            SessionNotFound: No such session.
        """
        with self._snapshot() as db:
            row = _execute(db, "SELECT updated_at, status, steps FROM sessions WHERE id = ?",
                           session_id).fetchone()
            marks = self._marks(db, session_id) if row else ()
        if row is None:
            raise SessionNotFound(f"no session {storable(session_id)!r} in {self.path}")
        return SessionRevision(session_id=session_id, status=row[1],
                               stamp=stamp_of(*row, *marks))

    def _marks(self, db: sqlite3.Connection, session_id: str) -> tuple[int, int, int]:
        """The session's count of saves, how many calls were saved one by one since the last,
        and the newest one's row id (a call saved again gets a new one)."""
        saves = _execute(db, "SELECT revision FROM revisions WHERE session_id = ?",
                         session_id).fetchone() if self._revisions else None
        try:
            calls = _execute(db, "SELECT count(*), coalesce(max(rowid), 0) FROM calls "
                             "WHERE session_id = ?", session_id).fetchone()
        except sqlite3.OperationalError:  # a store made before the calls table, read-only
            calls = (0, 0)
        return (saves[0] if saves else 0, calls[0], calls[1])

    def list(self, limit: int = 50) -> list[SessionSummary]:
        with self._lock:
            try:
                rows = _execute(
                    self._db,
                    "SELECT id, status, steps, question, created_at, updated_at, lease_owner, "
                    "lease_until FROM sessions ORDER BY updated_at DESC LIMIT ?", limit,
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None
        return [
            SessionSummary(session_id=r[0], status=r[1], steps=r[2], question=r[3],
                           created_at=r[4], updated_at=r[5],
                           interrupted=interrupted_run(r[1], r[6], r[7]))
            for r in rows
        ]

    def page(self, query: SessionQuery) -> _Summaries:
        """One page of the listing (see :class:`~miniagent.core.store.listing.SessionQuery`), read
        through an index on ``(status, updated_at, id)`` or ``(updated_at, id)``: its cost
        follows the page, not the store (a text filter reads on until the page is full), nor
        the sessions' size (only columns are read: a session's JSON only while it has no
        revisions row, saved by an older miniagent and not since)."""
        where, params = _page_filter(query)
        order = "ASC" if query.oldest_first else "DESC"
        tokens, joined = (_LISTED_TOKENS, "LEFT JOIN revisions ON session_id = id") if (
            self._revisions) else (_TOKENS, "")
        sql = (f"SELECT id, status, steps, question, created_at, updated_at, {tokens}, "
               "lease_owner, lease_until "
               f"FROM sessions {joined} {where} ORDER BY updated_at {order}, id {order} LIMIT ?")
        with self._lock:
            try:
                rows = _execute(self._db, sql, *params, query.limit).fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None
        return [
            SessionSummary(session_id=r[0], status=r[1], steps=r[2], question=r[3],
                           created_at=r[4], updated_at=r[5],
                           tokens=int(r[6]) if isinstance(r[6], (int, float)) else None,
                           interrupted=interrupted_run(r[1], r[7], r[8]))
            for r in rows
        ]

    def resolve(self, text: str) -> str:
        """The id of the one session ``text`` names: its id or a unique prefix of it.

        Raises:
            SessionNotFound, UserError (too short or ambiguous): see
            :func:`~miniagent.core.store.base.resolve_id`.
        """
        prefix = storable(text)
        with self._lock:
            try:
                # the ids that begin with the prefix are the first ones from it in sorted
                # order: the primary key's index finds them without reading the table
                rows = _execute(self._db, "SELECT id FROM sessions WHERE id >= ? ORDER BY id "
                                "LIMIT ?", prefix, SHOWN_MATCHES + 1).fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None
        return resolve_id(text, [r[0] for r in rows if r[0].startswith(prefix)], str(self.path))

    def update(self, session_id: str, change: Callable[[AgentSession], None], *,
               owner: str | None = None, force: bool = False) -> AgentSession:
        """Load, apply ``change``, save, in one transaction.

        With ``force``, a lease that looks held by a live process is overridden and dropped:
        if that process is still running the session, its next checkpoint is refused (it
        stops with an error) instead of writing over this change.

        Without an owner, a decision on a session whose holder waits for one at its approval
        prompt (:meth:`accept_decisions`) goes through: the holder goes on with it.
        """
        with self._transaction() as db:
            deciding = owner is None and not force and doors.open_for_holder(db, session_id)
            if not deciding:
                self._check_lease(db, session_id, owner, force=force)
            row = _execute(db, "SELECT data FROM sessions WHERE id = ?", session_id).fetchone()
            session = _with_calls(_decode(session_id, row[0]), self._saved_calls(db, session_id))
            change(session)
            if deciding:  # only decisions go through the door: the session still waits
                if session.status != "awaiting_approval":
                    self._check_lease(db, session_id, owner)
                doors.knock(db, session_id)
            session.updated_at = time.time()
            self._write(db, session)
            if force:
                _execute(db, "UPDATE sessions SET lease_owner = NULL, lease_until = NULL "
                         "WHERE id = ? AND lease_owner IS NOT ?", session_id, owner)
                doors.close(db, session_id)
        return session

    def accept_decisions(self, session_id: str, owner: str, accept: bool = True) -> int:
        """While ``owner`` holds the lease and waits for a person (an approval prompt), let
        other processes decide its waiting calls (:meth:`update`); ``accept=False`` shuts that
        again. Returns how many decisions arrived since it was opened (see
        :mod:`miniagent.core.store.decision_door`).

        Raises:
            SessionBusy: ``owner`` no longer holds the lease.
        """
        with self._transaction() as db:
            self._check_lease(db, session_id, owner, holding=True)
            count = doors.arrived(db, session_id, owner)
            if accept:
                doors.open_door(db, session_id, owner)
            else:
                doors.close(db, session_id)
        return count

    def decisions_arrived(self, session_id: str, owner: str) -> int:
        """How many decisions came from elsewhere since ``owner`` accepted them (a cheap read,
        polled while it waits)."""
        with self._lock:
            try:
                return doors.arrived(self._db, session_id, owner)
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None

    def awaits_decisions(self, session_id: str) -> bool:
        """Whether the process running the session waits for decisions and takes them."""
        with self._lock:
            try:
                return doors.open_for_holder(self._db, session_id)
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None

    def _check_lease(self, db: sqlite3.Connection, session_id: str, owner: str | None, *,
                     force: bool = False, holding: bool = False) -> None:
        """Raise unless ``owner`` may write: nobody else alive holds the session's lease.

        With ``holding`` (a run's checkpoint), ``owner`` must still hold the lease itself: a
        run whose lease was taken over (by force, or after it expired) never writes again.
        """
        row = _execute(db, "SELECT lease_owner, lease_until FROM sessions WHERE id = ?",
                       session_id).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {storable(session_id)!r} in {self.path}")
        if force or row[0] == owner:
            return
        if holding:
            raise SessionBusy(f"session {session_id} was taken over by another process "
                              f"({row[0] or 'and released'}); this run stops here")
        if row[0] is not None and lease_alive(row[0], row[1]) and held_here(row[0]):
            raise SessionBusy(
                f"session {session_id} is being run by this process ({row[0]}): a run, or a "
                "tool call of a stopped run that is still under way; wait for it to end")
        if row[0] is not None and lease_alive(row[0], row[1]):
            raise SessionBusy(
                f"session {session_id} is being run by another process ({row[0]}); wait for "
                "it to stop (if you know it has, override with --force / force=True)"
            )

    def acquire(self, session_id: str, owner: str, *, force: bool = False) -> None:
        """Take the session's lease; raises SessionBusy while a live process holds it.

        With ``force``, take it even then (a person knows that process is gone). While this
        store holds a lease it renews it, so a long tool call or a person slow to answer at
        an approval prompt never lets a live run's lease expire.
        """
        with self._transaction() as db:
            self._check_lease(db, session_id, owner, force=force)
            _execute(db, "UPDATE sessions SET lease_owner = ?, lease_until = ? WHERE id = ?",
                     owner, time.time() + LEASE_SECONDS, session_id)
            doors.close(db, session_id)
        self._renewer.hold(session_id, owner)

    def release(self, session_id: str, owner: str) -> None:
        self._renewer.drop(session_id, owner)
        with self._transaction() as db:
            cursor = _execute(db, "UPDATE sessions SET lease_owner = NULL, lease_until = NULL "
                              "WHERE id = ? AND lease_owner = ?", session_id, owner)
            if cursor.rowcount:
                doors.close(db, session_id)

    def _renew(self, held: _Leases) -> _Leases:
        """Push the expiry of these leases forward; the ones no longer held are returned."""
        lost: _Leases = []
        with self._transaction() as db:
            until = time.time() + LEASE_SECONDS
            for session_id, owner in held:
                cursor = _execute(db, "UPDATE sessions SET lease_until = ? "
                                  "WHERE id = ? AND lease_owner = ?", until, session_id, owner)
                if cursor.rowcount == 0:
                    lost.append((session_id, owner))
        return lost

    def close(self) -> None:
        self._renewer.close()
        with self._lock:
            self._db.close()


def _execute(db: sqlite3.Connection, sql: str, *params: Any) -> sqlite3.Cursor:
    return db.execute(sql, [storable(p) if isinstance(p, str) else p for p in params])


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (name,)).fetchone() is not None


def _add_revisions(db: sqlite3.Connection) -> None:
    """Give a store made by an older miniagent its revisions table, empty: a session gets its
    row at its next save, and until then the listing reads its tokens from its JSON
    (:data:`_LISTED_TOKENS`). Filling it here would hold the write lock over every session's
    JSON, and a large store would keep other processes waiting past their busy timeout."""
    if not _has_table(db, "revisions"):
        db.execute(_REVISIONS)


def _is_busy(exc: Exception) -> bool:
    """Whether SQLite gave up waiting for another connection's lock (SQLITE_BUSY, _LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc)
    return "database is locked" in text or "table is locked" in text


def _page_filter(query: SessionQuery) -> tuple[str, list[Any]]:
    """The WHERE clause of a page of the listing, and its parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if query.status is not None:
        clauses.append("status = ?")
        params.append(query.status)
    if query.text:
        pattern = "%" + query.text.replace("\\", "\\\\").replace("%", "\\%").replace(
            "_", "\\_") + "%"
        clauses.append("(question LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\')")
        params += [pattern, pattern]
    if query.after is not None:
        clauses.append(f"(updated_at, id) {'>' if query.oldest_first else '<'} (?, ?)")
        params += list(query.after)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _private_folder(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each 0700; folders that exist are kept."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        with suppress(FileExistsError):
            os.mkdir(path, 0o700)


def _can_write(path: Path) -> bool:
    """Whether the database file's folder, and the file if it exists, can be written."""
    folder_ok = os.access(path.parent, os.W_OK) if path.parent.exists() else True
    return folder_ok and (not path.exists() or os.access(path, os.W_OK))


def _private_file(path: Path) -> None:
    """Create an empty database file readable only by its owner, unless it exists."""
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _no_file_in_the_way(path: Path) -> None:
    """Raise NotADirectoryError when a file stands where one of ``path``'s folders must be."""
    for folder in path.parents:
        if folder.exists():
            if not folder.is_dir():
                raise NotADirectoryError(20, "a file stands where a folder must be", str(folder))
            return


def _connect_readonly(uri: str, busy_seconds: float) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, timeout=busy_seconds, isolation_level=None,
                           check_same_thread=False)


def _empty_store() -> sqlite3.Connection:
    """An empty store in memory that refuses writes: what a missing file reads as."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.execute(_SCHEMA)
    db.execute(_CALLS)
    db.execute(_REVISIONS)
    db.execute("PRAGMA query_only = ON")
    return db


def _with_calls(session: AgentSession, saved: list[tuple[int, str]]) -> AgentSession:
    """The session with the calls saved one by one put back in their step."""
    if not saved:
        return session
    from pydantic import TypeAdapter, ValidationError

    adapter = TypeAdapter(CallRecord)
    for step_number, data in saved:
        if not 1 <= step_number <= len(session.steps):
            continue  # a row left from a step the session no longer has: ignore it
        calls = session.steps[step_number - 1].calls
        try:
            record = adapter.validate_json(data)
        except ValidationError as exc:
            raise StoreCorrupted(f"session {session.id} is damaged: a saved call is invalid "
                                 f"({counted(exc.error_count(), 'field')})") from None
        for position, old in enumerate(calls):
            if old.call.id == record.call.id:
                calls[position] = record
    return session


def _decode(session_id: str, data: str) -> AgentSession:
    try:
        loaded = json.loads(data)
    except ValueError as exc:
        raise StoreCorrupted(
            f"session {session_id} is damaged: its JSON is invalid ({exc})"
        ) from None
    if not isinstance(loaded, dict):
        raise StoreCorrupted(f"session {session_id} is damaged: not a JSON object")
    return AgentSession.from_dict(loaded)


@contextmanager
def immediate_transaction(db: sqlite3.Connection,
                          failure: Callable[[sqlite3.DatabaseError], Exception]
                          ) -> Iterator[sqlite3.Connection]:
    """``db`` inside ``BEGIN IMMEDIATE`` (the write lock taken at once, so two processes never
    deadlock upgrading), committed at the end, rolled back on any exception; a database error
    becomes ``failure(error)``. The caller holds its connection's thread lock."""
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise failure(exc) from None


@contextmanager
def read_snapshot(db: sqlite3.Connection, failure: Callable[[sqlite3.DatabaseError], Exception]
                  ) -> Iterator[sqlite3.Connection]:
    """``db`` inside one read transaction (``BEGIN``, ``COMMIT`` at the end): what is read in it
    is as of one moment. A database error becomes ``failure(error)``. The caller holds its
    connection's thread lock."""
    try:
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise failure(exc) from None

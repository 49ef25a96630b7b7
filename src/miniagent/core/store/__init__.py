"""Checkpoint stores: where sessions are saved after every step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from miniagent.core.store.base import CheckpointStore, InMemoryStore

if TYPE_CHECKING:
    from miniagent.core.store.listing import SessionQuery, SessionSummary
    from miniagent.core.store.sqlite import SQLiteStore, default_store_path

__all__ = ["CheckpointStore", "InMemoryStore", "SQLiteStore", "SessionQuery",
           "SessionSummary", "default_store_path"]


def __getattr__(name: str) -> Any:
    # sqlite3 is loaded on first use of the SQLite store, not at `import miniagent`
    if name in ("SQLiteStore", "default_store_path"):
        from miniagent.core.store import sqlite

        return getattr(sqlite, name)
    if name in ("SessionQuery", "SessionSummary"):  # loaded with a listing
        from miniagent.core.store import listing

        return getattr(listing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

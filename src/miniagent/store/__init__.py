"""Checkpoint stores: where sessions are saved after every step."""

from miniagent.store.base import CheckpointStore, SessionSummary
from miniagent.store.memory import MemoryStore
from miniagent.store.sqlite import SQLiteStore, default_store_path

__all__ = ["CheckpointStore", "MemoryStore", "SQLiteStore", "SessionSummary", "default_store_path"]

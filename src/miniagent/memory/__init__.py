"""Long-term memory: facts saved in one SQLite file, found again by full-text search (FTS5,
BM25, Chinese included) and, with an embedder, by semantic search too; and the memory tools.

- :class:`Memory` (:mod:`.sqlite`): add, search, list, get, delete, clear; async twins.
- :mod:`.terms`: how text is indexed and how a query becomes a safe FTS5 expression.
- :mod:`.vectors`: embeddings in SQLite, cosine in Python, reciprocal rank fusion.
- :func:`endpoint_embedder` (:mod:`.embed`): embeddings from an OpenAI-compatible server.
- :func:`memory_tools` and :func:`recall_block` (:mod:`.tools`): ``remember`` and ``recall``
  for an agent, and the bounded block of recalled memories a model reads.

``sqlite3`` is imported with :class:`Memory`, on first use, not with this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from miniagent.memory.items import (
    MAX_ITEM_CHARS,
    MAX_K,
    MAX_LIST,
    MAX_METADATA_CHARS,
    MAX_NAMESPACE_CHARS,
    MAX_QUERY_CHARS,
    MemoryItem,
)

if TYPE_CHECKING:
    from miniagent.memory.embed import endpoint_embedder
    from miniagent.memory.sqlite import Embedder, Memory
    from miniagent.memory.tools import RECALL_HEADER, memory_tools, recall_block

__all__ = [
    "MAX_ITEM_CHARS", "MAX_K", "MAX_LIST", "MAX_METADATA_CHARS", "MAX_NAMESPACE_CHARS",
    "MAX_QUERY_CHARS", "RECALL_HEADER", "Embedder", "Memory", "MemoryItem", "endpoint_embedder",
    "memory_tools", "recall_block",
]


_LAZY = {"Memory": "sqlite", "Embedder": "sqlite", "endpoint_embedder": "embed",
         "RECALL_HEADER": "tools", "memory_tools": "tools", "recall_block": "tools"}
"""Loaded on first use, not with ``import miniagent`` (sqlite3, the HTTP client, the tools)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"miniagent.memory.{module}"), name)

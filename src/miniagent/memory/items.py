"""What a memory holds, and the bounds every input is checked against before it is stored.

Example:
    >>> item = MemoryItem(id="3f2a", text="The user lives in Tokyo.", created_at=0.0)
    >>> item.namespace, item.metadata, item.score
    ('default', {}, None)
    >>> checked_text("  ")
    Traceback (most recent call last):
    ...
    miniagent.core.errors.UserError: a memory's text is empty
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from miniagent.core.errors import UserError
from miniagent.core.session import storable

__all__ = [
    "MAX_ITEM_CHARS", "MAX_K", "MAX_LIST", "MAX_METADATA_CHARS", "MAX_NAMESPACE_CHARS",
    "MAX_QUERY_CHARS", "MemoryItem",
]

MAX_ITEM_CHARS = 8_000
"""The longest text one memory may hold: a fact or a short note, not a document."""

MAX_QUERY_CHARS = 2_000
"""The longest search query: a question or a user's turn."""

MAX_METADATA_CHARS = 4_000
"""The longest metadata, as compact JSON."""

MAX_NAMESPACE_CHARS = 100

MAX_K = 100
"""The most results one search returns."""

MAX_LIST = 10_000
"""The most items one listing returns."""


@dataclass(kw_only=True)
class MemoryItem:
    """One stored memory.

    Attributes:
        id: Its id, 16 hex digits.
        text: What was remembered.
        namespace: The group it belongs to (a user, a project, an agent).
        metadata: A JSON object given when it was added.
        created_at: When it was added (seconds since the epoch).
        score: How well it matched a search, higher is better; comparable only within the
            results of one search (BM25, cosine or fused rank, see
            :meth:`~miniagent.memory.Memory.search`). ``None`` outside a search.
    """

    id: str
    text: str
    namespace: str = "default"
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The item as JSON-ready values."""
        return {"id": self.id, "text": self.text, "namespace": self.namespace,
                "metadata": self.metadata, "created_at": self.created_at, "score": self.score}


def checked_text(text: object) -> str:
    """A memory's text, valid Unicode, within :data:`MAX_ITEM_CHARS`."""
    if not isinstance(text, str):
        raise UserError(f"a memory's text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise UserError("a memory's text is empty")
    if len(text) > MAX_ITEM_CHARS:
        raise UserError(f"a memory's text is {len(text):,} characters; the most is "
                        f"{MAX_ITEM_CHARS:,} (store a shorter fact, or split it)")
    return storable(text)


def checked_query(query: object) -> str:
    if not isinstance(query, str):
        raise UserError(f"a search query must be a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise UserError(f"the search query is {len(query):,} characters; the most is "
                        f"{MAX_QUERY_CHARS:,}")
    return storable(query)


def checked_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not namespace.strip():
        raise UserError(f"a namespace must be a non-empty string, got {namespace!r}")
    if len(namespace) > MAX_NAMESPACE_CHARS:
        raise UserError(f"a namespace is at most {MAX_NAMESPACE_CHARS} characters, got "
                        f"{len(namespace)}")
    return storable(namespace)


def checked_count(value: object, name: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise UserError(f"{name} must be an integer from 1 to {most}, got {value!r}")
    return value


def encoded_metadata(metadata: object) -> str:
    """``metadata`` (a dict, or None for none) as compact JSON, within the bound."""
    if metadata is None:
        return "{}"
    if not isinstance(metadata, dict):
        raise UserError(f"metadata must be a dict (a JSON object), got {type(metadata).__name__}")
    try:
        text = json.dumps(metadata, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise UserError(f"metadata must be JSON (strings, numbers, booleans, null, lists and "
                        f"objects with string keys): {exc}") from None
    if len(text) > MAX_METADATA_CHARS:
        raise UserError(f"metadata is {len(text):,} characters of JSON; the most is "
                        f"{MAX_METADATA_CHARS:,}")
    return storable(text)


def decoded_metadata(text: str) -> dict[str, Any]:
    """Stored metadata; ``{}`` for a value another program wrote that is not a JSON object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}

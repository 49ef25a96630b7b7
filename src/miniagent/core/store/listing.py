"""One line and one page of a session listing: :class:`SessionSummary`, :class:`SessionQuery`,
and where one session stands: :class:`SessionRevision`.

What a store's ``list``, ``page`` and ``revision`` return and take (the CLI's and the UI's
listings, the UI's pages that follow a session); the module loads with the first listing, not
with ``import miniagent``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["SessionQuery", "SessionRevision", "SessionSummary", "stamp_of"]


@dataclass(kw_only=True)
class SessionSummary:
    """One line of a session listing (read without loading the whole session)."""

    session_id: str
    status: str
    steps: int
    question: str
    created_at: float
    updated_at: float
    tokens: int | None = None
    """The session's counted tokens (see ``TokenUsage.counted_tokens``), where the listing
    reads them (:meth:`SQLiteStore.page`, :meth:`InMemoryStore.page`)."""
    interrupted: bool = False
    """Saved as ``running``, but no live process holds its lease (the process was killed, or
    its machine went down): nothing runs it, and ``sessions resume`` picks it up."""


@dataclass(frozen=True, kw_only=True)
class SessionRevision:
    """Where a saved session stands, read without loading it (a store's ``revision``)."""

    session_id: str
    status: str
    stamp: str
    """A short text that changes whenever the saved session changes (a save, a call saved on
    its own, a decision): a page that follows the session compares it, and reads the session
    only when it differs."""


def stamp_of(*parts: object) -> str:
    """A stamp (:attr:`SessionRevision.stamp`) made of what marks a session's saved state."""
    text = "|".join(repr(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class SessionQuery:
    """One page of a session listing: a filter, an order and where the page begins.

    Pages are keyset pages: ``after`` is the ``(updated_at, session_id)`` of the last row of
    the previous page, so a page costs the same whichever page it is (no ``OFFSET``).
    """

    status: str | None = None
    """Only sessions with this status."""
    text: str | None = None
    """Only sessions whose question or id holds this text (ASCII letters in any case)."""
    after: tuple[float, str] | None = None
    """Rows after this ``(updated_at, session_id)``, in the listing's order."""
    oldest_first: bool = False
    """Least recently updated first (the inbox); else most recently updated first."""
    limit: int = 50

    def follows(self, summary: SessionSummary) -> bool:
        """Whether ``summary`` belongs to this page's part of the listing (filter and
        ``after``; the limit aside): the reference semantics every store's page follows."""
        if self.status is not None and summary.status != self.status:
            return False
        if self.text and not _holds(summary, self.text):
            return False
        if self.after is None:
            return True
        key = (summary.updated_at, summary.session_id)
        return key > self.after if self.oldest_first else key < self.after


def _holds(summary: SessionSummary, text: str) -> bool:
    wanted = _ascii_lower(text)
    return wanted in _ascii_lower(summary.question) or wanted in _ascii_lower(summary.session_id)


def _ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, as SQLite's LIKE compares them."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

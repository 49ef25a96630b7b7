"""New ids for sessions, calls and spans: :data:`random_id`.

Drivers draw every id the step logic needs (the in-process driver from here, a Temporal
workflow from ``workflow.uuid4()``), so that replaying recorded effects gives the same ids.
"""

from __future__ import annotations

import os
import random

__all__ = ["random_id"]


class _Ids:
    """64 random bits per id from a generator seeded by the OS once per process (reading the
    OS's source for each of the ~13 ids of a run cost 4 µs each); a fork reseeds."""

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self._random = random.Random(os.urandom(32))

    def __call__(self) -> str:
        return f"{self._random.getrandbits(64):016x}"


random_id = _Ids()
"""A new id: 16 hex digits, unique (not secret: ids are not credentials)."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=random_id.reseed)

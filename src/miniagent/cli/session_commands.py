"""The commands the CLI prints for a person to copy: a session's ``resume``, ``approve``,
``show``..., where the session lives (a store file, a Temporal cluster), quoted for a shell."""

from __future__ import annotations

import shlex
from pathlib import Path


def resume_command(session_id: str, store: Path | None, temporal: str | None = None) -> str:
    """The command that continues ``session_id`` (in the same store, or cluster)."""
    return session_command("resume", session_id, store, temporal)


def session_command(verb: str, session_id: str, store: Path | None,
                    temporal: str | None = None, *extra: str) -> str:
    """``miniagent sessions VERB SESSION_ID ...`` where the session lives, quoted for a shell
    so that it can be copied and run as it is (a store path with spaces included)."""
    return shlex.join(["miniagent", "sessions", verb, session_id, *extra,
                       *where_options(store, temporal)])


def where_options(store: Path | None, temporal: str | None = None) -> list[str]:
    """The option that names where the session lives: ``--store FILE``, ``--temporal HOST``."""
    if temporal:
        return ["--temporal", temporal]
    return ["--store", str(store)] if store else []

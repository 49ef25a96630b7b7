"""The seal on what the command line records in a session (``metadata["cli"]``).

A resume, and the inbox after a decision, rebuild a session's agent from that record: they
import its tools files and connect to its model and MCP servers. A Python application's caller
can put anything in a session's metadata (``Agent.run(metadata=...)``), so a record is used
only when it carries a seal: an HMAC of the record under a key private to this user
(``$XDG_DATA_HOME/miniagent/record.key``, mode 0600, drawn on first use). Whoever cannot read
that file cannot make a record miniagent will act on.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from miniagent._internal.files import private_dir
from miniagent.core.errors import ConfigError

RECORD, SEAL = "cli", "cli_seal"
"""The metadata keys of the record and of its seal."""


def key_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "miniagent" / "record.key"


def _key(*, create: bool) -> bytes | None:
    path = key_path()
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        if not create:
            return None
    except (OSError, ValueError):  # unreadable or damaged: nothing is trusted, nothing made
        return None
    private_dir(path.parent)
    drawn = secrets.token_hex(32)
    try:  # O_EXCL: two first uses at once agree on one key
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _key(create=False)
    with os.fdopen(descriptor, "w", encoding="ascii") as out:
        out.write(drawn)
    return bytes.fromhex(drawn)


def _mac(key: bytes, record: dict[str, Any]) -> str:
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def sealed(record: dict[str, Any]) -> dict[str, Any]:
    """The metadata that keeps ``record`` with its seal."""
    key = _key(create=True)
    if key is None:
        raise ConfigError(f"cannot read the key that seals what a session records: "
                          f"{key_path()} is damaged or unreadable (delete it to draw a new one; "
                          "sessions sealed with the old one are then resumed with options)")
    return {RECORD: record, SEAL: _mac(key, record)}


def unsealed(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The record in ``metadata`` if this user's miniagent sealed it, else None (no record,
    no seal, a wrong one, or no key on this machine)."""
    record, seal = metadata.get(RECORD), metadata.get(SEAL)
    if not isinstance(record, dict) or not isinstance(seal, str):
        return None
    key = _key(create=False)
    return record if key is not None and hmac.compare_digest(seal, _mac(key, record)) else None


__all__ = ["RECORD", "SEAL", "key_path", "sealed", "unsealed"]

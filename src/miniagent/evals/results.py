"""The results file of an eval run: one JSON line per finished task run, appended at once.

A rerun pointed at the same folder reads the file and runs only what is missing, so an eval
that crashed (or was killed) picks up where it stopped. A line cut short by the crash is
dropped on reading. ``config.json`` beside it records what the results were produced with;
a rerun with another configuration is refused rather than mixed in.

Every JSON file of an eval is written with :func:`dumps`, which all JSON parsers read.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any

from miniagent._internal.files import open_private, private_dir, write_private
from miniagent.core.errors import UserError

RESULTS = "results.jsonl"
CONFIG = "config.json"
TRACES = "traces"


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity in it written as a string (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``): JSON has no such numbers, and a model may pass one as a
    tool argument, which a run's record keeps."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """``value`` as strict JSON text (see :func:`finite`), non-ASCII text kept as it is."""
    return json.dumps(finite(value), ensure_ascii=False, allow_nan=False, indent=indent,
                      sort_keys=sort_keys)


def run_key(mode: str, repeat: int, task_id: str) -> str:
    """The identity of one task run inside an eval."""
    return f"{mode}/{repeat}/{task_id}"


class ResultsFile:
    """The results of an eval folder: read what exists, append each new result durably."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / RESULTS
        self._lock = threading.Lock()

    def open(self, identity: dict[str, Any], *, fresh: bool = False) -> dict[str, dict[str, Any]]:
        """Prepare the folder for ``identity``; return the results already there, by key.

        Raises:
            UserError: the folder holds results of another configuration (without ``fresh``).
        """
        private_dir(self.folder / TRACES)
        config = self.folder / CONFIG
        if fresh:
            self.path.unlink(missing_ok=True)
        elif config.exists() and self.path.exists():
            saved = _read_json(config)
            if saved != finite(identity):  # as it was written
                changed = sorted(k for k in {*saved, *identity}
                                 if saved.get(k) != identity.get(k))
                raise UserError(
                    f"{self.folder} holds results of another configuration (differs in: "
                    f"{', '.join(changed)}); pass --fresh to start over or choose another --out")
        write_private(config, dumps(identity, indent=2, sort_keys=True))
        return self._read()

    def append(self, result: dict[str, Any]) -> None:
        line = dumps(result) + "\n"
        with self._lock, open_private(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _read(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        found: dict[str, dict[str, Any]] = {}
        good: list[str] = []
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        for line in lines:
            try:
                record = json.loads(line)
                key = record["key"]
            except (ValueError, KeyError, TypeError):
                continue  # a line the crash cut short
            found[key] = record
            good.append(line)
        if len(good) != len(lines):  # rewrite without the broken line before appending
            write_private(self.path, "".join(f"{line}\n" for line in good))
        return found


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None

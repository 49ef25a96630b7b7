"""Files miniagent writes hold transcripts (traces, eval results, reports, sessions): every one
is private to its owner, mode 0600 in folders of mode 0700, whatever the umask.

Example:
    >>> import tempfile, pathlib, stat
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> private_dir(folder)
    >>> write_private(folder / "report.json", "{}")
    >>> oct(stat.S_IMODE((folder / "report.json").stat().st_mode))
    '0o600'
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any

__all__ = ["FILE_MODE", "open_private", "private_dir", "write_private"]

FILE_MODE, DIR_MODE = 0o600, 0o700


def private_dir(path: str | os.PathLike[str]) -> None:
    """Make ``path`` (and missing parents) as folders only the owner can enter."""
    folder = Path(path)
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for item in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(item, DIR_MODE)


def open_private(path: str | os.PathLike[str], mode: str, **options: Any) -> IO[Any]:
    """:func:`open` for writing (``w``, ``a``, binary or text), the file created 0600 (and an
    existing one made so)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    descriptor = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(descriptor, FILE_MODE)  # one made before, with the umask's mode
        return os.fdopen(descriptor, mode, **options)
    except BaseException:
        os.close(descriptor)
        raise


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, a private file."""
    with open_private(path, "w", encoding="utf-8") as handle:
        handle.write(text)

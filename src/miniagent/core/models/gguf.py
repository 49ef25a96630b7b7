"""What a GGUF file says about its model: family, size, name (read from its header only).

A GGUF file starts with key-value metadata (``general.architecture``, ``general.basename``,
``general.size_label``, ``<arch>.block_count``, ...) before the tokenizer's vocabulary and the
tensors. The embedded model's aids are decided from these (see
:mod:`miniagent.core.models.profiles`), not from the file's size, which says more about the
quantisation than about the model. Only the keys before the tokenizer's are read, at most
:data:`MAX_HEADER_BYTES`, so a damaged or hostile file costs little: anything unexpected
gives an empty :class:`GGUFInfo`.

Written here (about forty lines) rather than taken from the ``gguf`` package: that one maps
the whole file and builds numpy arrays of every tensor's description, to read four strings.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ["GGUFInfo", "read_info"]

MAX_HEADER_BYTES = 1 << 20
"""At most this much of a file is read for its metadata."""

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFInfo:
    """The model facts of a GGUF file's header (empty strings and 0 where it says nothing)."""

    architecture: str = ""
    name: str = ""
    basename: str = ""
    size_label: str = ""
    block_count: int = 0

    @property
    def parameters(self) -> float:
        """The parameter count its size label gives (``1.5B`` -> 1.5e9; 0 when unknown)."""
        found = re.fullmatch(r"\s*(?:\d+x)?([\d.]+)\s*([KMBT])\s*", self.size_label, re.I)
        if found is None:
            found = re.search(r"(?<![\w.])([\d.]+)\s*([MB])\b", self.name, re.I)
        if found is None:
            return 0.0
        scale = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[found.group(2).upper()]
        try:
            return float(found.group(1)) * scale
        except ValueError:
            return 0.0

    @property
    def family(self) -> str:
        """The model's family in lower case (``qwen2.5-coder``, ``smollm2``; else its
        architecture)."""
        base = (self.basename or self.name).strip().lower().replace(" ", "-")
        base = re.sub(r"-?(\d+(\.\d+)?[mb])?-?(instruct|chat|it)?$", "", base)
        return base or self.architecture.lower()


def read_info(path: str | Path) -> GGUFInfo:
    """The header facts of the GGUF file at ``path`` (an empty one for anything else)."""
    try:
        with open(path, "rb") as handle:
            return _read(handle)
    except (OSError, ValueError, struct.error, UnicodeDecodeError):
        return GGUFInfo()


def _read(handle: IO[bytes]) -> GGUFInfo:
    if handle.read(4) != b"GGUF":
        return GGUFInfo()
    version, _tensors, count = struct.unpack("<IQQ", handle.read(20))
    if version < 2:
        return GGUFInfo()
    values: dict[str, Any] = {}
    for _ in range(min(count, 4096)):
        key = _string(handle)
        if key.startswith("tokenizer.") or handle.tell() > MAX_HEADER_BYTES:
            break  # the vocabulary and everything after it: nothing this needs
        values[key] = _value(handle, struct.unpack("<I", handle.read(4))[0])
    arch = str(values.get("general.architecture", ""))
    blocks = values.get(f"{arch}.block_count", 0)
    return GGUFInfo(architecture=arch, name=str(values.get("general.name", "")),
                    basename=str(values.get("general.basename", "")),
                    size_label=str(values.get("general.size_label", "")),
                    block_count=blocks if isinstance(blocks, int) else 0)


def _string(handle: IO[bytes]) -> str:
    (size,) = struct.unpack("<Q", handle.read(8))
    if size > 65536:
        raise ValueError("a metadata string longer than 64 KiB")
    return handle.read(size).decode("utf-8")


def _value(handle: IO[bytes], kind: int) -> Any:
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        inner, size = struct.unpack("<IQ", handle.read(12))
        if size > 4096:
            raise ValueError("a metadata array this reader does not need")
        return [_value(handle, inner) for _ in range(size)]
    fmt = _SCALARS.get(kind)
    if fmt is None:
        raise ValueError(f"unknown metadata type {kind}")
    return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]

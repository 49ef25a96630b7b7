"""The GGUF header reader and the aids decided from it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from miniagent.core.models.base import ALL_AIDS
from miniagent.core.models.gguf import GGUFInfo, read_info
from miniagent.core.models.profiles import TINY_AIDS, aids_for, is_tiny


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, values: dict[str, object], *, vocabulary: int = 3) -> Path:
    """A GGUF header with ``values`` (strings and u32), then a tokenizer array."""
    pairs = b""
    for key, value in values.items():
        if isinstance(value, str):
            pairs += _string(key) + struct.pack("<I", 8) + _string(value)
        else:
            pairs += _string(key) + struct.pack("<I", 4) + struct.pack("<I", value)
    tokens = _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, vocabulary) + b"".join(
        _string(f"t{n}") for n in range(vocabulary))
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(values) + 1)
    path.write_bytes(header + pairs + tokens)
    return path


QWEN = {"general.architecture": "qwen2", "general.name": "Qwen2.5 Coder 1.5B Instruct GGUF",
        "general.basename": "Qwen2.5-Coder", "general.size_label": "1.5B",
        "qwen2.block_count": 28}


def test_the_header_names_family_and_size(tmp_path: Path) -> None:
    info = read_info(write_gguf(tmp_path / "m.gguf", QWEN))
    assert (info.family, info.parameters, info.block_count) == ("qwen2.5-coder", 1.5e9, 28)


@pytest.mark.parametrize("content", [b"", b"NOPE" * 10, b"GGUF\x03\x00\x00\x00" + b"\xff" * 20,
                                     b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack(
                                         "<Q", 1 << 60)])
def test_anything_else_reads_as_an_empty_header(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    assert read_info(path) == GGUFInfo()
    assert read_info(tmp_path / "missing.gguf") == GGUFInfo()


def test_the_vocabulary_is_never_read(tmp_path: Path) -> None:
    """The tokenizer's array (150k strings in a real file) ends the reading."""
    info = read_info(write_gguf(tmp_path / "m.gguf", QWEN, vocabulary=1_000_000))
    assert info.size_label == "1.5B"


def test_aids_follow_family_and_size_not_the_file_size() -> None:
    def info(family: str, size: str) -> GGUFInfo:
        return GGUFInfo(architecture="llama", basename=family, size_label=size)

    assert aids_for(info("SmolLM2", "135M"), 98_000_000) == TINY_AIDS
    assert set(TINY_AIDS) == set(ALL_AIDS) - {"restate_question", "ground_figures"}
    assert aids_for(info("Qwen2.5-Coder", "1.5B"), 1_117_000_000) == (
        "strict_selection", "restate_question", "ground_figures")
    assert aids_for(info("Qwen2.5-Coder", "7B"), 4_000_000_000) == ()
    big_file_small_model = aids_for(info("Qwen2.5-Coder", "0.5B"), 2_000_000_000)
    assert big_file_small_model and "strict_selection" not in big_file_small_model
    assert aids_for(info("Unknown", "7B"), 300_000_000) == ()  # a small file of a big model
    assert aids_for(GGUFInfo(), 98_000_000) == TINY_AIDS  # no header: by the file's size
    assert aids_for(GGUFInfo(), 4_000_000_000) == ()
    assert is_tiny(info("SmolLM2", "135M"), 98_000_000)
    assert not is_tiny(info("Qwen2.5-Coder", "0.5B"), 491_000_000)

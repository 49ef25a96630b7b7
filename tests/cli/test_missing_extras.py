"""A command that needs an extra which is not installed says so in one line, with the command
that installs it: each command runs in a real environment holding the core dependencies only
(tests/core_only.py), where the extras' modules are absent."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from core_only import PYPROJECT, core_only_python
from miniagent._internal.extras import EXTRA_MODULES

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="reads pyproject with tomllib")

MODEL = ["--base-url", "http://127.0.0.1:9/v1"]  # never reached: the extra is missing first
TEMPORAL = ["--temporal", "127.0.0.1:9"]
COMMANDS = [
    (["ui", "--port", "0"], "ui"),
    (["ui", "--port", "0", *TEMPORAL], "ui"),
    (["worker", *TEMPORAL, *MODEL], "temporal"),
    (["sessions", "list", *TEMPORAL], "temporal"),
    (["sessions", "show", "s1", *TEMPORAL], "temporal"),
    (["sessions", "approve", "s1", *TEMPORAL], "temporal"),
    (["sessions", "resume", "s1", *TEMPORAL], "temporal"),
    (["run", "hi", *TEMPORAL], "temporal"),
    (["run", "hi", *MODEL, "--metrics", "127.0.0.1:0"], "metrics"),
    (["run", "hi", *MODEL, "--otlp", "http://127.0.0.1:9"], "otel"),
    (["run", "hi", *MODEL, "--mcp", "server --stdio"], "mcp"),
    (["worker", *TEMPORAL, *MODEL, "--mcp-url", "http://127.0.0.1:9/mcp"], "mcp"),
    (["mcp-serve", "--tools", "builtin"], "mcp"),
    (["run", "hi"], "local"),
]


@pytest.fixture(scope="session")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return core_only_python(tmp_path_factory.mktemp("core-only") / "venv")


def test_the_environment_lacks_every_extra(core_python: Path) -> None:
    modules = [module for modules in EXTRA_MODULES.values() for module in modules]
    probe = ("import importlib.util, sys; "
             "print([m for m in sys.argv[1:] if importlib.util.find_spec(m)])")
    out = subprocess.run([str(core_python), "-c", probe, *modules], capture_output=True,
                         text=True, check=True, env=_env(None)).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("command", "extra"), COMMANDS, ids=lambda c: " ".join(c)
                         if isinstance(c, list) else c)
def test_a_missing_extra_is_one_line_naming_the_install(
        core_python: Path, tmp_path: Path, command: list[str], extra: str) -> None:
    done = subprocess.run([str(core_python), "-m", "miniagent", *command], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env=_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"pip install 'miniagent[{extra}]'" in done.stderr
    assert done.stdout == ""


def test_each_extra_of_pyproject_is_known_with_its_modules() -> None:
    """EXTRA_MODULES names, per extra a user installs, modules its distributions provide."""
    import tomllib

    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    provided = metadata.packages_distributions()
    for extra, lines in extras.items():
        if extra in ("test", "bench", "docs"):  # the project's own tools, never imported
            continue
        dists = {canonicalize_name(Requirement(line).name) for line in lines}
        for module in EXTRA_MODULES[extra]:
            assert dists & {canonicalize_name(d) for d in provided.get(module, [])}, (extra, module)
    assert set(EXTRA_MODULES) == set(extras) - {"test", "bench", "docs"}


def _env(tmp_path: Path | None) -> dict[str, str]:
    """This process's environment without PYTHONPATH (the core environment finds the source
    under test through its own .pth line)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if tmp_path is not None:
        env["MINIAGENT_STORE"] = str(tmp_path / "sessions.db")
    return env

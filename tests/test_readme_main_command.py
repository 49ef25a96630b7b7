"""The README's main command, run as written on the embedded model its setup installs (the
catalog's default, in the user's model cache), prints 391: asked as a person asks, without
"use the calculator" (temperature 0 and one thread: the same prompt gives the same steps).
The README's Quickstart, saved as a file and run with no server, prints ``completed``."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from docs_pages import block_with
from miniagent.core.models.catalog import CACHE_ENV, DEFAULT_MODEL, installed_path, user_cache_dir

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")

USER_CACHE = user_cache_dir()
"""Read at import, before conftest points ``MINIAGENT_MODEL_CACHE`` at an empty folder."""


def main_command() -> list[str]:
    block = README.split("## The two commands", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    run = block.strip().split("&&")[-1]
    words = shlex.split(run)
    assert words[:2] == ["miniagent", "run"], run
    return words[1:]


def test_the_main_command_answers_391(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    if installed_path(DEFAULT_MODEL, USER_CACHE) is None:
        pytest.skip(f"the default model is not installed (bash scripts/setup.sh, or miniagent "
                    f"model install {DEFAULT_MODEL})")
    out = subprocess.run([sys.executable, "-m", "miniagent", *main_command()],
                         capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env=offline_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert f"{DEFAULT_MODEL}.gguf" in out.stderr  # the model setup installed, not SmolLM2
    assert re.search(r"Final Answer.*\n.*\b391\b", out.stdout), out.stdout


def offline_env(home: Path) -> dict[str, str]:
    """No server, no key: only the user's model cache, as after the README's setup (and the
    checkout's ``PYTHONPATH``, where a test run sets one)."""
    source = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "COLUMNS": "100",
            CACHE_ENV: str(USER_CACHE), "MINIAGENT_THREADS": "1", **source}


def test_the_quickstart_prints_completed(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    if installed_path(DEFAULT_MODEL, USER_CACHE) is None:
        pytest.skip(f"the default model is not installed (bash scripts/setup.sh, or miniagent "
                    f"model install {DEFAULT_MODEL})")
    readme = README[README.index("## Quickstart"):]
    assert "save this as `quickstart.py` and run\n`python quickstart.py`" in readme
    script = tmp_path / "quickstart.py"
    script.write_text(block_with("agent = Agent(model=LocalModel(), tools=[add])"),
                      encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=900, cwd=tmp_path, env=offline_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "completed", out.stdout

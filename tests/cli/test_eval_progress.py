"""``miniagent eval``'s progress bar: nothing drawn before the eval is accepted, an ETA once a
few task runs finished."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from test_cli import clean_env

from miniagent.cli.eval_view import ETA_AFTER, EvalProgress
from miniagent.testing.stub_server import StubServer

EVAL_TOOLS = Path(__file__).parents[1] / "evals" / "eval_tools.py"


def test_a_folder_of_another_configuration_is_refused_before_any_bar(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t0", "input": "1 plus 1?",
                                 "expected": {"answer": 2, "check": "number"}}) + "\n")
    with StubServer(["Thought: easy\nFinal Answer: 2"] * 2).run_in_thread() as stub:
        command = [sys.executable, "-m", "miniagent", "eval", str(tasks), "--tools",
                   str(EVAL_TOOLS), "--base-url", stub.base_url, "--mode", "react",
                   "--out", str(tmp_path / "out")]
        env = {**clean_env(), "COLUMNS": "80"}
        first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stderr
        assert "eval" in first.stderr and "1/1" in first.stderr  # the bar, when it runs
        changed = subprocess.run([*command, "--max-steps", "3"], env=env,
                                 capture_output=True, text=True, timeout=60)
    assert changed.returncode == 2
    (line,) = changed.stderr.strip().splitlines()
    assert line.startswith("miniagent: ") and "another configuration" in line
    assert changed.stdout == ""


class Clock:
    """The progress bar's time, moved by the test (no sleeping, no timing)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(n: int) -> dict[str, Any]:
    return {"correct": True, "key": f"react/0/t{n}"}


def test_the_bar_shows_an_eta_once_a_few_runs_finished() -> None:
    clock = Clock()
    progress = EvalProgress(Console(file=io.StringIO(), color_system=None), get_time=clock)
    shown = []
    with progress:
        progress.start(10, 0)
        for n in range(ETA_AFTER):
            clock.now += 60  # each run takes a minute
            progress.result(record(n))
            shown.append(bar(progress))
    assert all("ETA" not in text for text in shown[:-1]), shown
    assert "ETA 0:07:00" in shown[-1]  # 3 runs in 3 minutes, 7 to go


def bar(progress: EvalProgress) -> str:
    """The bar's line as the terminal would show it now."""
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(
        progress.progress.make_tasks_table(progress.progress.tasks))
    return out.getvalue()

"""What the `miniagent` command prints reads as English at 80 columns (issue 22), as a real
subprocess against the stub server."""

from __future__ import annotations

from pathlib import Path

from test_cli import cli

from miniagent.testing.stub_server import StubServer


def test_a_one_step_run_says_1_step(tmp_path: Path) -> None:
    with StubServer(["Thought: easy\nFinal Answer: hi"]).run_in_thread() as stub:
        out = cli("run", "hello?", "--mode", "react", "--store", str(tmp_path / "s.db"),
                  "--base-url", stub.base_url, "--model", "m")
    assert out.returncode == 0, out.stderr
    assert "completed · 1 step · " in out.stdout and "1 steps" not in out.stdout

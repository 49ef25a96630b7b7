"""Ctrl-C during `miniagent run` / `sessions resume`: exit 130 and say how to go on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_process import cli_env, started_cli
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def interrupt_when(args: list[str], marker: str, store: Path) -> tuple[int, str, str]:
    """Run the CLI, press Ctrl-C once ``marker`` was printed; (exit code, stdout, stderr)."""
    env = cli_env(MINIAGENT_STORE=str(store), COLUMNS="120")
    process, seen = started_cli(args, marker, env=env, timeout=30, stderr=subprocess.PIPE)
    try:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, (seen + out).decode(), err.decode()


def test_ctrl_c_says_which_session_and_how_to_resume_it(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with StubServer(lambda _data, _n: "Final Answer: late", latency=60).run_in_thread() as stub:
        base = ["--base-url", stub.base_url, "--model", "m", "--store", str(store)]
        code, _out, err = interrupt_when(["run", "slow question", *base], "step 1", store)
        assert code == 130, err
        assert "Traceback" not in err
        (line,) = err.strip().splitlines()
        listed = subprocess.run(
            [sys.executable, "-m", "miniagent", "sessions", "list", "--json", "--store",
             str(store)], capture_output=True, text=True, check=True, env=cli_env())
        (session,) = json.loads(listed.stdout)
        session_id = session["session_id"]
        assert f"session {session_id}" in line
        assert f"miniagent sessions resume {session_id} --store {store}" in line

        code, _out, err = interrupt_when(["sessions", "resume", session_id, *base], "step",
                                         store)
    assert code == 130, err
    (line,) = err.strip().splitlines()
    assert f"miniagent sessions resume {session_id} --store {store}" in line

"""``sessions list`` tells a run whose process was killed from one that is running (issue 36):
a real ``miniagent run`` subprocess, SIGKILLed mid-run, and its real SQLite store."""

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


def sessions_list(store: Path, *extra: str) -> str:
    out = subprocess.run([sys.executable, "-m", "miniagent", "sessions", "list", "--store",
                          str(store), *extra], capture_output=True, text=True, env=cli_env(),
                         timeout=60, check=True)
    return out.stdout


def test_a_killed_run_is_listed_as_interrupted_with_the_resume_command(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with StubServer(lambda _data, _n: "Final Answer: late", latency=60).run_in_thread() as stub:
        base = ["--base-url", stub.base_url, "--model", "m", "--store", str(store)]
        process, _ = started_cli(["run", "slow question", *base], "step 1", env=cli_env())
        try:
            (alive,) = json.loads(sessions_list(store, "--json"))
            assert alive["status"] == "running" and "interrupted" not in alive
            assert "interrupted" not in sessions_list(store)
        finally:
            process.send_signal(signal.SIGKILL)
            process.communicate(timeout=30)
    (killed,) = json.loads(sessions_list(store, "--json"))
    assert killed["status"] == "running" and killed["interrupted"] is True
    table = sessions_list(store)
    session_id = killed["session_id"]
    assert "interrupted" in table and " running " not in table, table
    assert f"miniagent sessions resume {session_id} --store {store}" in table, table
    with StubServer(["Final Answer: on time"]).run_in_thread() as stub:
        resumed = subprocess.run(
            [sys.executable, "-m", "miniagent", "sessions", "resume", session_id, "--store",
             str(store), "--base-url", stub.base_url, "--json"],
            capture_output=True, text=True, env=cli_env(), timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["final_answer"].endswith("on time")
    (done,) = json.loads(sessions_list(store, "--json"))
    assert done["status"] == "completed" and "interrupted" not in done

"""``sessions list`` tells a run whose process was killed from one that is running (issue 36):
a real ``miniagent run`` subprocess, SIGKILLed mid-run, and its real SQLite store."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import miniagent
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), PYTHONUNBUFFERED="1",
               COLUMNS="200")
    return env


def started_run(args: list[str], marker: str) -> subprocess.Popen[bytes]:
    """A ``miniagent`` process, returned once it printed ``marker`` (within 60 s)."""
    process = subprocess.Popen([sys.executable, "-m", "miniagent", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env())
    assert process.stdout is not None
    seen = b""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while marker.encode() not in seen:
                assert selector.select(timeout=60), f"no {marker!r} in {seen!r}"
                chunk = os.read(process.stdout.fileno(), 65536)
                assert chunk, f"the command ended early: {seen!r}"
                seen += chunk
    except BaseException:
        process.kill()
        process.communicate()
        raise
    return process


def sessions_list(store: Path, *extra: str) -> str:
    out = subprocess.run([sys.executable, "-m", "miniagent", "sessions", "list", "--store",
                          str(store), *extra], capture_output=True, text=True, env=_env(),
                         timeout=60, check=True)
    return out.stdout


def test_a_killed_run_is_listed_as_interrupted_with_the_resume_command(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with StubServer(lambda _data, _n: "Final Answer: late", latency=60).run_in_thread() as stub:
        base = ["--base-url", stub.base_url, "--model", "m", "--store", str(store)]
        process = started_run(["run", "slow question", *base], "step 1")
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
            capture_output=True, text=True, env=_env(), timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["final_answer"].endswith("on time")
    (done,) = json.loads(sessions_list(store, "--json"))
    assert done["status"] == "completed" and "interrupted" not in done

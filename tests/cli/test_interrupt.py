"""Ctrl-C during `miniagent run` / `sessions resume`: exit 130 and say how to go on."""

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


def interrupt_when(args: list[str], marker: str, store: Path) -> tuple[int, str, str]:
    """Run the CLI, press Ctrl-C once ``marker`` was printed; (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), PYTHONUNBUFFERED="1",
               MINIAGENT_STORE=str(store), COLUMNS="120")
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env,
        # a shell running us in the background ignores SIGINT, and children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stdout is not None
    seen = b""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while marker.encode() not in seen:
                assert selector.select(timeout=30), f"no {marker!r} in {seen!r}"
                chunk = os.read(process.stdout.fileno(), 65536)
                assert chunk, f"the command ended early: {seen!r}"
                seen += chunk
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
             str(store)], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONPATH": str(Path(miniagent.__file__).parents[1])})
        (session,) = json.loads(listed.stdout)
        session_id = session["session_id"]
        assert f"session {session_id}" in line
        assert f"miniagent sessions resume {session_id} --store {store}" in line

        code, _out, err = interrupt_when(["sessions", "resume", session_id, *base], "step",
                                         store)
    assert code == 130, err
    (line,) = err.strip().splitlines()
    assert f"miniagent sessions resume {session_id} --store {store}" in line

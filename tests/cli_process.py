"""A real ``miniagent`` process for tests that stop it midway (Ctrl-C, SIGKILL): started with a
clean environment, and handed back once it printed a marker."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import miniagent


def cli_env(**extra: str) -> dict[str, str]:
    """This environment without ``MINIAGENT_*``/``OPENAI_*`` settings, running this checkout's
    miniagent unbuffered, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), PYTHONUNBUFFERED="1",
               COLUMNS="200")
    env.update(extra)
    return env


def started_cli(args: list[str], marker: str, *, env: dict[str, str], timeout: float = 60,
                stderr: int = subprocess.DEVNULL) -> tuple[subprocess.Popen[bytes], bytes]:
    """``python -m miniagent ARGS``, returned with what it printed once that holds ``marker``
    (within ``timeout`` seconds a read); the process is killed if it never does. SIGINT is
    restored to its default, since a shell running us in the background ignores it and
    children inherit that."""
    process = subprocess.Popen(
        [sys.executable, "-m", "miniagent", *args], stdout=subprocess.PIPE, stderr=stderr,
        env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stdout is not None
    seen = b""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while marker.encode() not in seen:
                assert selector.select(timeout=timeout), f"no {marker!r} in {seen!r}"
                chunk = os.read(process.stdout.fileno(), 65536)
                assert chunk, f"the command ended early: {seen!r}"
                seen += chunk
    except BaseException:
        process.kill()
        process.communicate()
        raise
    return process, seen

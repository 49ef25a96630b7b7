"""`miniagent run --compress-at` end to end: a real subprocess against the stub HTTP server;
what the server received, what the trace shows, and what the saved session holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import miniagent
from miniagent.core.session import SCHEMA_VERSION
from miniagent.testing.stub_server import StubServer


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess running this checkout, no endpoint from the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(miniagent.__file__).parents[1]), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "miniagent", *args], capture_output=True,
                          text=True, env={**env, "COLUMNS": "120"}, timeout=120, cwd=cwd)


def test_run_compresses_the_history_the_server_receives(tmp_path: Path) -> None:
    for n in range(1, 9):
        (tmp_path / f"part{n}.txt").write_text(f"part {n}: " + "data " * 150 + "\n",
                                               encoding="utf-8")
    script = [f'Thought: part {n}\nAction: read_file\n'
              f'Action Input: {{"file_path": "part{n}.txt"}}' for n in range(1, 9)]
    script.append("Thought: done\nFinal Answer: read all 8 parts")
    store = tmp_path / "sessions.db"
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "Read every part", "--tools", "builtin", "--mode", "react",
                  "--base-url", stub.base_url, "--model", "m", "--max-steps", "12",
                  "--compress-at", "5000c", "--keep-last", "2", "--store", str(store),
                  cwd=tmp_path)
        received = list(stub.requests)
    assert out.returncode == 0, out.stderr
    assert "context compacted: rounds 1-" in out.stdout and "read all 8 parts" in out.stdout
    summaries = [r["messages"][2]["content"] for r in received if len(r["messages"]) > 2
                 and r["messages"][2]["content"].startswith("Summary of earlier steps")]
    assert summaries, "no request carried a summary"
    assert 'Action: read_file {"file_path": "part1.txt"}' in summaries[-1]
    last = received[-1]["messages"]
    assert last[-1]["content"].startswith("Observation:") and "part 8: data" in last[-1][
        "content"]  # the latest rounds whole
    shown = cli("sessions", "show", "--store", str(store), "--json",
                json.loads(cli("sessions", "list", "--store", str(store), "--json").stdout)[0][
                    "session_id"])
    assert shown.returncode == 0, shown.stderr
    saved = json.loads(shown.stdout)
    assert saved["schema_version"] == SCHEMA_VERSION and saved["compactions"]
    assert saved["metadata"]["cli"]["compress_at"] == "5000c"
    full = sum(len(m["content"] or "") for m in saved["messages"][:-1])  # before the answer
    sent = sum(len(m["content"]) for m in last[1:])  # the history sent, without the system
    assert sent < 5000 < full  # the session keeps everything, the server got the compacted


def test_a_bad_compress_at_is_one_clear_line(tmp_path: Path) -> None:
    out = cli("run", "hi", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
              "--compress-at", "lots", "--store", str(tmp_path / "s.db"))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "compress_at 'lots' is not a size" in out.stderr
    assert out.stderr.strip().count("\n") == 0

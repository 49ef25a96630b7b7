"""Durable sessions across real processes: SIGKILL mid-tool, approvals from another process,
two processes resuming at once. Each process is the real `miniagent` CLI over a real SQLite
file, talking HTTP to a stub server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from miniagent.testing.stub_server import StubServer

TOOLS = str(Path(__file__).with_name("durable_tools.py"))


def act(name: str, args: dict[str, Any]) -> str:
    return f"Thought: next\nAction: {name}\nAction Input: {json.dumps(args)}"


SCRIPTS = {
    "crash while fetching": [act("append_line", {"text": "one"}), act("slow_fetch", {"key": "k"}),
                             "Final Answer: appended and fetched"],
    "crash while appending": [act("slow_append", {"text": "two"}), "Final Answer: handled"],
    "transfer money": [act("transfer", {"amount": 100}), "Final Answer: transferred"],
}


def answer(request: dict[str, Any], _n: int) -> str:
    """A stateless scripted model: the next line of the question's script."""
    messages = request["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    seen = sum(1 for m in messages if str(m.get("content", "")).startswith("Observation:"))
    return SCRIPTS[question][seen]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(answer).run_in_thread() as server:
        yield server


class Env:
    def __init__(self, tmp: Path, stub: StubServer) -> None:
        self.store, self.log, self.marks = tmp / "sessions.db", tmp / "log.txt", tmp / "marks"
        self.marks.mkdir()
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        self.base.update(MINIAGENT_STORE=str(self.store), MINIAGENT_BASE_URL=stub.base_url,
                         MINIAGENT_MODEL="stub", DURABLE_LOG=str(self.log),
                         DURABLE_MARKS=str(self.marks), COLUMNS="120")

    def popen(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "miniagent", *args],
                                env={**self.base, **env}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "miniagent", *args],
                              env={**self.base, **env}, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)

    def json(self, *args: str, **env: str) -> dict[str, Any]:
        out = self.run(*args, "--json", **env)
        assert out.stdout, out.stderr
        result: dict[str, Any] = json.loads(out.stdout)
        return result

    def log_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def kill_when_started(self, proc: subprocess.Popen[str], mark: str) -> None:
        deadline = time.monotonic() + 60
        while not (self.marks / mark).exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{mark} never started"
            time.sleep(0.05)
        proc.kill()  # SIGKILL: no cleanup, no finally blocks
        proc.wait()
        (self.marks / mark).unlink()

    def only_session(self) -> str:
        sessions = json.loads(self.run("sessions", "list", "--json").stdout)
        assert len(sessions) == 1
        session_id: str = sessions[0]["session_id"]
        return session_id


@pytest.fixture
def env(tmp_path: Path, stub: StubServer) -> Env:
    return Env(tmp_path, stub)


def start(env: Env, question: str, **extra: str) -> subprocess.Popen[str]:
    return env.popen("run", question, "--tools", TOOLS, "--mode", "react", "--json", **extra)


def test_sigkill_mid_tool_then_resume_elsewhere_runs_each_completed_call_once(env: Env) -> None:
    proc = start(env, "crash while fetching", DURABLE_SLOW="60")
    env.kill_when_started(proc, "slow_fetch")
    session_id = env.only_session()
    listed = json.loads(env.run("sessions", "list", "--json").stdout)[0]
    assert (listed["status"], listed["steps"]) == ("running", 2)

    result = env.json("sessions", "resume", session_id, DURABLE_SLOW="0")
    assert (result["status"], result["final_answer"]) == ("completed", "appended and fetched")
    assert env.log_lines() == ["append one", "started slow_fetch", "started slow_fetch"]
    assert [o["output"] for s in result["trace"] for o in s["observations"]] == [
        "appended", "fetched k"]


def test_sigkill_mid_unsafe_tool_asks_a_person_and_never_repeats_it(env: Env) -> None:
    proc = start(env, "crash while appending", DURABLE_SLOW="60")
    env.kill_when_started(proc, "slow_append")
    session_id = env.only_session()

    waiting = env.json("sessions", "resume", session_id)
    assert waiting["status"] == "awaiting_approval"
    (pending,) = waiting["pending_approvals"]
    assert pending["tool"] == "slow_append" and "never completed" in pending["reason"]

    denied = env.run("sessions", "deny", session_id, pending["call_id"], "--reason",
                     "it did append")
    assert denied.returncode == 0, denied.stderr
    result = env.json("sessions", "resume", session_id)
    assert (result["status"], result["final_answer"]) == ("completed", "handled")
    assert env.log_lines() == ["append two", "started slow_append"]
    assert "it did append" in result["trace"][0]["observations"][0]["output"]


def test_approval_given_from_another_process(env: Env) -> None:
    first = env.run("run", "transfer money", "--tools", TOOLS, "--mode", "react", "--json")
    assert first.returncode == 3, first.stderr
    waiting = json.loads(first.stdout)
    assert waiting["status"] == "awaiting_approval" and env.log_lines() == []
    (pending,) = waiting["pending_approvals"]
    assert (pending["tool"], pending["arguments"]) == ("transfer", {"amount": 100})

    shown = env.run("sessions", "show", waiting["session_id"])
    assert "transfer" in shown.stdout and "awaiting_approval" in shown.stdout
    approved = env.run("sessions", "approve", waiting["session_id"], pending["call_id"])
    assert approved.returncode == 0 and "approved" in approved.stdout
    result = env.json("sessions", "resume", waiting["session_id"])
    assert (result["status"], result["final_answer"]) == ("completed", "transferred")
    assert env.log_lines() == ["started transfer", "transfer 100"]


def test_plain_run_prints_how_to_approve(env: Env) -> None:
    out = env.run("run", "transfer money", "--tools", TOOLS, "--mode", "react", "--detach")
    assert out.returncode == 3
    assert "awaiting approval" in out.stdout and "miniagent sessions approve" in out.stdout


def test_two_processes_resuming_at_once_one_wins(env: Env, tmp_path: Path) -> None:
    first = env.json("run", "transfer money", "--tools", TOOLS, "--mode", "react")
    session_id = first["session_id"]
    assert env.run("sessions", "approve", session_id).returncode == 0
    release = tmp_path / "release"  # the winner's transfer waits for it
    racers = [env.popen("sessions", "resume", session_id, "--json",
                        DURABLE_RELEASE=str(release)) for _ in range(2)]
    deadline = time.monotonic() + 90
    while all(p.poll() is None for p in racers):  # the loser exits while the winner waits
        assert time.monotonic() < deadline, "neither resume finished"
        time.sleep(0.05)
    loser = next(p for p in racers if p.poll() is not None)
    winner = next(p for p in racers if p is not loser)
    _, loser_err = loser.communicate()
    release.touch()
    winner_out, _ = winner.communicate(timeout=90)
    assert loser.returncode == 1 and winner.returncode == 0
    assert "being run by another process" in loser_err and "Traceback" not in loser_err
    assert json.loads(winner_out)["status"] == "completed"
    assert env.log_lines() == ["started transfer", "transfer 100"]


def set_lease_pid(store: Path, session_id: str, pid: int) -> str:
    """Rewrite the session's lease as if its owner's PID now ran process ``pid``."""
    with sqlite3.connect(store) as db:
        (owner,) = db.execute("SELECT lease_owner FROM sessions WHERE id = ?",
                              (session_id,)).fetchone()
        parts = owner.split(":")
        reused = ":".join([parts[0], str(pid), *parts[2:]])
        db.execute("UPDATE sessions SET lease_owner = ? WHERE id = ?", (reused, session_id))
    return reused


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="start times come from /proc")
def test_a_crashed_runs_pid_reused_by_another_process_does_not_hold_its_session(
        env: Env) -> None:
    proc = start(env, "crash while fetching", DURABLE_SLOW="60")
    env.kill_when_started(proc, "slow_fetch")
    session_id = env.only_session()
    set_lease_pid(env.store, session_id, os.getpid())  # like PID 1 of the next container
    result = env.json("sessions", "resume", session_id, DURABLE_SLOW="0")
    assert (result["status"], result["final_answer"]) == ("completed", "appended and fetched")


def test_force_takes_a_live_session_over_with_a_warning(env: Env, tmp_path: Path) -> None:
    first = env.json("run", "transfer money", "--tools", TOOLS, "--mode", "react")
    session_id = first["session_id"]
    assert env.run("sessions", "approve", session_id).returncode == 0
    release = tmp_path / "release"
    holder = env.popen("sessions", "resume", session_id, "--json", DURABLE_RELEASE=str(release))
    try:
        deadline = time.monotonic() + 60
        while not (env.marks / "transfer").exists():  # the holder is inside its tool call
            assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()
            time.sleep(0.05)
        busy = env.run("sessions", "cancel", session_id)
        assert busy.returncode == 1 and "being run by another process" in busy.stderr
        assert "--force" in busy.stderr
        forced = env.run("sessions", "cancel", session_id, "--force")
        assert forced.returncode == 0, forced.stderr
        assert "warning" in forced.stderr and "may still be running" in forced.stderr
        release.touch()
        out, _ = holder.communicate(timeout=90)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
    stopped = json.loads(out)  # its tool call finished, but it could not write any more
    assert stopped["status"] == "error" and "taken over" in stopped["reason"]
    shown = json.loads(env.run("sessions", "show", session_id, "--json").stdout)
    assert shown["status"] == "cancelled"


def test_listing_a_store_that_does_not_exist_creates_nothing(env: Env) -> None:
    listed = env.run("sessions", "list", "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
    assert not env.store.exists()


def run_on_readonly_folder(env: Env, folder: Path, *args: str
                           ) -> subprocess.CompletedProcess[str]:
    """Run the CLI where ``folder`` cannot be written: modes 0555/0444, or as root (who
    ignores modes) a read-only bind mount in a mount namespace of its own."""
    command = [sys.executable, "-m", "miniagent", *args]
    if os.geteuid() != 0:
        files = list(folder.iterdir())
        for f in files:
            f.chmod(0o444)
        folder.chmod(0o555)
        try:
            return subprocess.run(command, env=env.base, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=120)
        finally:
            folder.chmod(0o700)
            for f in files:
                f.chmod(0o600)
    probe = subprocess.run(["unshare", "--mount", "mount", "--bind", "-o", "ro", str(folder),
                            str(folder)], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("as root, file modes do not stop writes and no read-only mount can be made "
                    f"here ({probe.stderr.decode(errors='replace').strip()})")
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return subprocess.run(["unshare", "--mount", "sh", "-c", script, str(folder), *command],
                          env=env.base, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_a_store_in_a_readonly_folder_can_be_listed_and_shown(env: Env) -> None:
    out = env.run("run", "transfer money", "--tools", TOOLS, "--mode", "react", "--json")
    session_id = json.loads(out.stdout)["session_id"]
    db = sqlite3.connect(env.store)  # the last connection to close folds the WAL in
    db.execute("SELECT count(*) FROM sessions").fetchone()
    db.close()
    assert not Path(f"{env.store}-wal").exists()
    folder = env.store.parent
    listed = run_on_readonly_folder(env, folder, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["session_id"] for r in json.loads(listed.stdout)] == [session_id]
    shown = run_on_readonly_folder(env, folder, "sessions", "show", session_id)
    assert shown.returncode == 0 and "awaiting_approval" in shown.stdout, shown.stderr
    refused = run_on_readonly_folder(env, folder, "sessions", "cancel", session_id)
    assert refused.returncode == 1 and "cannot be written" in refused.stderr
    assert "Traceback" not in refused.stderr

"""Leases on real processes: who holds a session, when a lease frees, and the override.

A lease names its owner by host, PID and the process's start time, and it expires unless its
owner renews it. The holders here are real processes (SIGKILLed, crashed as PID 1 of a PID
namespace, or alive and forced out), and every process a test starts, it stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import miniagent
from miniagent import Agent, ScriptedModel
from miniagent.core.errors import SessionBusy
from miniagent.core.session import AgentSession
from miniagent.core.store import SQLiteStore
from miniagent.core.store import base as lease
from miniagent.core.store.base import lease_alive, new_owner, process_start, random_id

SRC = str(Path(miniagent.__file__).resolve().parents[1])
HOST = socket.gethostname()
LINUX_PROC = process_start(os.getpid()) is not None

# A process that takes a session's lease, prints its owner id, then obeys one line of stdin:
# "crash" ends it without releasing anything; "save" checkpoints under its lease and prints
# the outcome; "door" waits for decisions from elsewhere (as a run at its approval prompt) and
# prints "open"; anything else (or end of input) releases the lease and exits.
HOLDER = """
import os, sys
from miniagent.core.errors import SessionBusy
from miniagent.core.store import SQLiteStore
from miniagent.core.store.base import new_owner
store, session_id, owner = SQLiteStore(sys.argv[1]), sys.argv[2], new_owner()
store.acquire(session_id, owner)
print(owner, flush=True)
command = sys.stdin.readline().strip()
if command == "crash":
    os._exit(0)
if command == "save":
    try:
        store.save(store.load(session_id), owner=owner)
        print("saved", flush=True)
    except SessionBusy as exc:
        print(f"refused: {exc}", flush=True)
    sys.stdin.readline()
if command == "door":
    store.accept_decisions(session_id, owner)
    print("open", flush=True)
    sys.stdin.readline()
store.release(session_id, owner)
"""


def saved(path: Path) -> str:
    store = SQLiteStore(path)
    session = AgentSession.start("q", id=random_id(), at=time.time())
    store.save(session)
    store.close()
    return session.id


def lease_row(path: Path, session_id: str) -> tuple[str | None, float | None]:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT lease_owner, lease_until FROM sessions WHERE id = ?",
                         (session_id,)).fetchone()
    return row[0], row[1]


def set_lease(path: Path, session_id: str, owner: str, until: float) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET lease_owner = ?, lease_until = ? WHERE id = ?",
                   (owner, until, session_id))


class Holder:
    """A real process holding a session's lease (see HOLDER)."""

    def __init__(self, path: Path, session_id: str, *prefix: str) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-c", HOLDER, str(path), session_id],
            env={**os.environ, "PYTHONPATH": SRC}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.owner = self.stdout.readline().strip()
        assert self.owner, self.proc.communicate()

    def tell(self, command: str) -> str:
        self.stdin.write(command + "\n")
        self.stdin.flush()
        return self.stdout.readline().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.stop()


@pytest.mark.skipif(not LINUX_PROC, reason="process start times come from Linux /proc")
def test_the_owner_names_host_pid_and_start_time() -> None:
    host, pid, start, token = new_owner().split(":")
    assert (host, pid, start) == (HOST, str(os.getpid()), process_start(os.getpid()))
    assert len(token) == 8


def test_a_sigkilled_holder_frees_its_lease_at_once(tmp_path: Path,
                                                    holders: list[Holder]) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    holders.append(holder := Holder(path, session_id))
    store = SQLiteStore(path)
    with pytest.raises(SessionBusy, match="being run by another process"):
        store.acquire(session_id, new_owner())
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait()
    assert lease_row(path, session_id)[0] == holder.owner  # nothing released it
    store.acquire(session_id, new_owner())



def test_a_door_left_by_a_sigkilled_holder_waits_for_nothing(tmp_path: Path,
                                                             holders: list[Holder]) -> None:
    """Killed at its approval prompt, a holder leaves its decision door behind: nobody waits
    there any more, so a decision is one for a session nobody holds."""
    path = tmp_path / "s.db"
    session_id = saved(path)
    holders.append(holder := Holder(path, session_id))
    assert holder.tell("door") == "open"
    store = SQLiteStore(path)
    assert store.awaits_decisions(session_id)
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait()
    assert not store.awaits_decisions(session_id)


@pytest.mark.skipif(not LINUX_PROC, reason="process start times come from Linux /proc")
def test_a_reused_pid_does_not_keep_a_dead_owners_lease(tmp_path: Path,
                                                       holders: list[Holder]) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    holders.append(holder := Holder(path, session_id))
    holder.proc.kill()
    holder.proc.wait()
    # the dead owner's id, as if its PID now ran another process: this one
    host, _pid, start, token = holder.owner.split(":")
    assert start != process_start(os.getpid())
    set_lease(path, session_id, f"{host}:{os.getpid()}:{start}:{token}", time.time() + 3600)
    SQLiteStore(path).acquire(session_id, new_owner())


@pytest.mark.skipif(not LINUX_PROC, reason="process start times come from Linux /proc")
def test_the_same_pid_with_another_start_time_is_another_process() -> None:
    start = process_start(os.getpid())
    assert start is not None
    later = time.time() + 3600
    assert lease_alive(f"{HOST}:{os.getpid()}:{start}:feedbeef", later)
    assert not lease_alive(f"{HOST}:{os.getpid()}:{int(start) + 1}:feedbeef", later)


def _pid_namespaces() -> bool:
    if not LINUX_PROC or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _pid_namespaces(),
                    reason="needs unshare and the right to make PID namespaces")
def test_pid_1_of_a_crashed_container_does_not_hold_the_next_pid_1_off(
        tmp_path: Path, holders: list[Holder]) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    in_container = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")
    holders.append(crashed := Holder(path, session_id, *in_container))
    assert crashed.owner.split(":")[1] == "1"
    crashed.tell("crash")  # PID 1 ends without releasing: like a container that crashed
    crashed.proc.wait()
    assert lease_row(path, session_id)[0] == crashed.owner
    holders.append(second := Holder(path, session_id, *in_container))  # PID 1 again
    assert second.owner.split(":")[1] == "1"
    assert lease_row(path, session_id)[0] == second.owner


def test_an_expired_lease_of_a_live_process_is_free(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    alive = new_owner()  # this very process, alive, with its own start time
    set_lease(path, session_id, alive, time.time() - 1)
    assert not lease_alive(alive, time.time() - 1)
    SQLiteStore(path).acquire(session_id, new_owner())


def test_without_proc_the_pid_and_the_expiry_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease, "process_start", lambda pid: None)
    lease._process_identity.cache_clear()  # this process's identity is read once, normally
    try:
        owner = new_owner()
    finally:
        lease._process_identity.cache_clear()
    assert owner.split(":")[2] == "-"
    assert lease_alive(owner, time.time() + 60)
    assert lease_alive(f"{HOST}:{os.getpid()}:12345:feedbeef", time.time() + 60)
    assert lease_alive(f"{HOST}:{os.getpid()}:feedbeef", time.time() + 60)  # an older owner id
    assert not lease_alive(owner, time.time() - 1)


def test_another_hosts_lease_holds_until_it_expires() -> None:
    assert lease_alive("elsewhere:1:99:feedbeef", time.time() + 60)
    assert not lease_alive("elsewhere:1:99:feedbeef", time.time() - 1)


def test_force_takes_a_live_holders_lease_and_refuses_its_next_save(
        tmp_path: Path, holders: list[Holder]) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    holders.append(holder := Holder(path, session_id))
    store, mine = SQLiteStore(path), new_owner()
    with pytest.raises(SessionBusy, match="--force"):
        store.acquire(session_id, mine)
    store.acquire(session_id, mine, force=True)
    assert lease_row(path, session_id)[0] == mine
    assert holder.tell("save").startswith(f"refused: session {session_id} was taken over")
    store.release(session_id, mine)
    assert lease_row(path, session_id)[0] is None


def test_a_forced_update_drops_the_live_holders_lease(tmp_path: Path,
                                                      holders: list[Holder]) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    holders.append(holder := Holder(path, session_id))
    store = SQLiteStore(path)
    with pytest.raises(SessionBusy):
        store.update(session_id, lambda s: s.metadata.update(note="by hand"))
    store.update(session_id, lambda s: s.metadata.update(note="by hand"), force=True)
    assert store.load(session_id).metadata == {"note": "by hand"}
    assert lease_row(path, session_id)[0] is None
    assert holder.tell("save").startswith("refused:")  # it cannot write over the change
    assert store.load(session_id).metadata == {"note": "by hand"}


def test_agent_cancel_and_resume_take_force(tmp_path: Path, holders: list[Holder]) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    holders.append(Holder(path, session_id))
    agent = Agent(model=ScriptedModel(["Final Answer: mine now"]), store=SQLiteStore(path))
    with pytest.raises(SessionBusy):
        agent.resume(session_id)
    result = agent.resume(session_id, force=True)
    assert (result.status, result.final_answer) == ("completed", "mine now")

    other = saved(path)
    holders.append(Holder(path, other))
    with pytest.raises(SessionBusy):
        agent.cancel(other)
    agent.cancel(other, force=True)
    assert agent.session(other).status == "cancelled"


def test_a_held_lease_is_renewed_while_its_run_saves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    session_id = saved(path)
    store, owner = SQLiteStore(path), new_owner()
    store.RENEW_SECONDS = 0.01
    store.acquire(session_id, owner)
    set_lease(path, session_id, owner, time.time() - 1)  # as if a long tool call had run on
    deadline = time.monotonic() + 30
    while (lease_row(path, session_id)[1] or 0) < time.time():
        assert time.monotonic() < deadline, "the lease was never renewed"
        time.sleep(0.01)
    with pytest.raises(SessionBusy):
        SQLiteStore(path).acquire(session_id, new_owner())
    thread = store._renewer._thread
    store.release(session_id, owner)
    assert thread is not None
    thread.join(timeout=30)
    assert not thread.is_alive()  # nothing held: the renewer stopped


def test_a_long_tool_call_keeps_the_runs_lease(tmp_path: Path) -> None:
    from miniagent import tool

    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    store.RENEW_SECONDS = 0.01

    @tool
    def wait_long() -> str:
        """Stand for a tool call longer than the lease lasts."""
        (session_id, owner, _), = _held(path)
        set_lease(path, session_id, owner, time.time() - 1)
        deadline = time.monotonic() + 30
        while (lease_row(path, session_id)[1] or 0) < time.time():
            if time.monotonic() > deadline:
                return "expired"
            time.sleep(0.01)
        try:
            SQLiteStore(path).acquire(session_id, new_owner())
        except SessionBusy:
            return "still held"
        return "taken by another process"

    model = ScriptedModel(['Thought: wait\nAction: wait_long\nAction Input: {}',
                           "Final Answer: done"])
    result = Agent(model=model, tools=[wait_long], store=store).run("wait")
    assert result.status == "completed"
    (step, _) = result.steps
    assert [o.output for o in step.observations] == ["still held"]


def _held(path: Path) -> list[tuple[str, str, float]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT id, lease_owner, lease_until FROM sessions "
                          "WHERE lease_owner IS NOT NULL").fetchall()

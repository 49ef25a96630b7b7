"""Processes and polling shared by the Temporal tests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from miniagent.temporal import SessionView, TemporalSessions

TOOLS = str(Path(__file__).with_name("worker_tools.py"))


def act(name: str, args: dict[str, Any]) -> str:
    return f"Thought: next\nAction: {name}\nAction Input: {json.dumps(args)}"


SCRIPTS = {
    "fetch it": [act("slow_fetch", {"key": "k"}), "Final Answer: fetched"],
    "append it": [act("slow_append", {"text": "two"}), "Final Answer: appended"],
    "transfer money": [act("transfer", {"amount": 100}), "Final Answer: done"],
    "time in Tokyo": [act("get_current_time", {"timezone": "Asia/Tokyo"}),
                      "Final Answer: it is late in Tokyo"],
}


def answer(request: dict[str, Any], _n: int) -> str | dict[str, Any]:
    """A stateless scripted model: the next line of the question's script."""
    messages = request["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    if question == "transfer natively":  # native tool calls, with an id the test knows
        if any(m["role"] == "tool" for m in messages):
            return "done natively"
        return {"content": None, "tool_calls": [
            {"id": "pay-1", "name": "transfer", "arguments": {"amount": 7}}]}
    seen = sum(1 for m in messages if str(m.get("content", "")).startswith("Observation:"))
    return SCRIPTS[question][seen]


class Processes:
    """`miniagent` processes of one test, stopped at teardown."""

    def __init__(self, tmp: Path, base_url: str, address: str) -> None:
        self.address, self.log, self.marks = address, tmp / "log.txt", tmp / "marks"
        self.marks.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        self.env.update(MINIAGENT_BASE_URL=base_url, MINIAGENT_MODEL="stub",
                        DURABLE_LOG=str(self.log), DURABLE_MARKS=str(self.marks),
                        COLUMNS="150", PYTHONPATH=os.pathsep.join(sys.path))
        self.running: list[subprocess.Popen[str]] = []

    def worker(self, task_queue: str, mode: str = "react", *extra: str, **env: str
               ) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "miniagent", "worker", "--temporal", self.address,
             "--task-queue", task_queue, "--tools", TOOLS, "--mode", mode, *extra],
            env={**self.env, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True)
        self.running.append(proc)
        return proc

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "miniagent", *args, "--temporal",
                               self.address], env=self.env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)

    def log_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    async def wait_for_mark(self, name: str) -> None:
        for _ in range(600):
            if (self.marks / name).exists():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{name} never started; log: {self.log_lines()}")

    def stop(self) -> None:
        for proc in self.running:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


async def wait_status(sessions: TemporalSessions, session_id: str, status: str,
                      tries: int = 600) -> SessionView:
    """Poll the status query until it says ``status`` (bounded)."""
    view = None
    for _ in range(tries):
        try:
            view = await sessions.view(session_id)
        except Exception:  # not started yet: no worker has run its first task
            view = None
        if view is not None and view.status == status:
            return view
        await asyncio.sleep(0.1)
    raise AssertionError(f"session {session_id} never reached {status}: {view}")


def address(env: WorkflowEnvironment) -> str:
    """The dev server's HOST:PORT, for the CLI."""
    return env.client.service_client.config.target_host

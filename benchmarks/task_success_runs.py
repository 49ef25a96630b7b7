"""The runs of ``benchmarks/task_success.py``: miniagent through its CLI, each peer through its
runner (``benchmarks/peers/run_*.py``) in its own virtual environment, every task graded by
miniagent's own scoring (:func:`miniagent.evals.runner.score_run`).

Each runtime runs in a child process bounded per task: ``miniagent eval --timeout`` plus a
deadline for the whole command; a peer runner's own timeout plus a hard deadline per task,
after which its process group is killed and it starts again for the tasks left. A runtime
that fails gets an ``error`` record for each task it did not finish; the others go on.

A peer's task becomes a :class:`~miniagent.core.types.RunResult` built from what its runner saw:
one step per chat completion the server answered (usage as reported), with the tool calls of
that reply as miniagent decodes them
(:func:`~miniagent.core.models.openai_wire.normalize_completion`), except the framework's own
answer tool (smolagents' ``final_answer``); a tool function the framework ran is matched to
the earliest unmatched call of that name, and one matching none (a call the framework read
from the reply's text) is added to the latest step. Calls are
then scored exactly as miniagent's are (:mod:`miniagent.evals.calls`).
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import (
    CallRecord,
    Observation,
    RunResult,
    RunStatus,
    Step,
    TokenUsage,
    ToolCall,
)
from miniagent.evals.checks import Checker
from miniagent.evals.faults import FaultLog
from miniagent.evals.runner import score_run
from miniagent.evals.tasks import EvalTask

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
GRACE = 30.0
"""Seconds past a task's timeout before its process is killed (the runtime's own bound
comes first: it records what it saw)."""
STARTUP = 180.0
"""Seconds a runner may take to import its framework and start a task."""
STATUSES = {"completed", "max_steps", "timeout", "error"}


@dataclass(kw_only=True)
class Settings:
    """What every runtime is given."""

    base_url: str
    model: str
    max_steps: int
    max_tokens: int
    temperature: float
    timeout: float
    out: Path
    miniagent_args: str = ""


@dataclass(kw_only=True)
class Grader:
    """miniagent's tools registry and answer checkers, to score every runtime alike."""

    tools: ToolRegistry
    checkers: dict[str, Checker]

    def record(self, task: EvalTask, result: RunResult, runtime: str, seconds: float,
               **extra: Any) -> dict[str, Any]:
        record = score_run(task, result, mode=runtime, repeat=0, tools=self.tools,
                           log=FaultLog(), wall_time=seconds, checkers=self.checkers,
                           trace=None)
        return {**record, "runtime": runtime, **extra}

    def failed(self, task: EvalTask, runtime: str, status: RunStatus, reason: str,
               seconds: float = 0.0) -> dict[str, Any]:
        """The record of a task the runtime did not finish."""
        return self.record(task, RunResult(status=status, reason=reason), runtime, seconds,
                           error=reason)


# -- miniagent ------------------------------------------------------------------------------


def run_miniagent(mode: str, tasks: list[EvalTask], settings: Settings, grader: Grader,
                  tools_file: Path) -> list[dict[str, Any]]:
    """``miniagent eval`` in ``mode`` on ``tasks``; one record per task."""
    runtime = f"miniagent-{mode}"
    folder = settings.out / runtime
    folder.mkdir(parents=True, exist_ok=True)
    tasks_file = folder / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.model_dump(mode="json"), ensure_ascii=False)
                                  + "\n" for t in tasks), encoding="utf-8")
    command = [sys.executable, "-m", "miniagent", "eval", str(tasks_file),
               "--tools", str(tools_file), "--base-url", settings.base_url,
               "--model", settings.model, "--mode", mode, "--max-steps", str(settings.max_steps),
               "--max-tokens", str(settings.max_tokens), "--timeout", str(settings.timeout),
               "--request-timeout", str(settings.timeout), "--out", str(folder / "eval"),
               "--fresh", "--json", *shlex.split(settings.miniagent_args)]
    deadline = len(tasks) * (settings.timeout + GRACE) + STARTUP
    with (folder / "stderr.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log,
                                   start_new_session=True)
        try:
            code: int | str = process.wait(deadline)
        except subprocess.TimeoutExpired:
            code = f"killed after {deadline:.0f} s"
        finally:
            kill_group(process)  # past the deadline, or on Ctrl-C: never left running
    found = _read_results(folder / "eval" / "results.jsonl")
    records = []
    for task in tasks:
        record = found.get(task.id)
        if record is None:
            why = f"miniagent eval exited ({code}) before this task; see {folder / 'stderr.log'}"
            records.append(grader.failed(task, runtime, "error", why))
            continue
        records.append({**record, "mode": runtime, "runtime": runtime,
                        "error": record["reason"] if record["status"] == "error" else None})
    return records


def _read_results(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        found[record["id"]] = record
    return found


# -- peers ------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Peer:
    """A framework run by ``benchmarks/peers/<script>`` in ``venv``."""

    name: str
    script: str
    requirements: list[str]
    distribution: str
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def _marker(self) -> Path:
        return self.venv / ".peer-requirements"

    def ready(self) -> bool:
        """Whether the venv holds exactly these requirements already."""
        wanted = "".join(f"{r}\n" for r in self.requirements)
        return (self.python.exists() and self._marker.exists()
                and self._marker.read_text() == wanted)

    def ensure_venv(self, log: Path) -> None:
        """Create the venv with the framework and miniagent (editable, for the tools) unless
        it is :meth:`ready`."""
        if self.ready():
            return
        with log.open("wb") as out:
            for command in ([sys.executable, "-m", "venv", "--clear", str(self.venv)],
                            [str(self.python), "-m", "pip", "install", "-q",
                             *self.requirements, "-e", str(REPO)]):
                if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode:
                    raise RuntimeError(f"setting up {self.venv} failed: see {log}")
        self._marker.write_text("".join(f"{r}\n" for r in self.requirements))

    def version(self) -> str:
        code = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"
        done = subprocess.run([str(self.python), "-c", code, self.distribution],
                              capture_output=True, text=True)
        return done.stdout.strip() or "?"


def run_peer(peer: Peer, tasks: list[EvalTask], settings: Settings,
             grader: Grader) -> list[dict[str, Any]]:
    """The peer's runner on ``tasks`` (started again after a timeout or a crash); one record
    per task."""
    folder = settings.out / peer.name
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {t.id: t for t in tasks}
    events: dict[str, list[dict[str, Any]]] = {t.id: [] for t in tasks}
    done: dict[str, dict[str, Any]] = {}
    rounds = 0
    while len(done) < len(tasks):
        rounds += 1
        left = [t for t in tasks if t.id not in done]
        finished, why = _one_round(peer, left, settings, folder, rounds, events)
        for task_id, outcome in finished.items():
            done[task_id] = _peer_record(by_id[task_id], events[task_id], outcome, peer.name,
                                         grader)
        if not finished:  # no progress: the runner cannot run; the tasks left fail with why
            for task in left:
                done[task.id] = grader.failed(task, peer.name, "error", why)
    return [done[t.id] for t in tasks]


def _one_round(peer: Peer, tasks: list[EvalTask], settings: Settings, folder: Path,
               number: int, events: dict[str, list[dict[str, Any]]]
               ) -> tuple[dict[str, dict[str, Any]], str]:
    """One start of the runner: the outcomes it gave, and why it stopped early if it did."""
    job = folder / f"job-{number}.json"
    job.write_text(json.dumps({
        "base_url": settings.base_url, "model": settings.model, "api_key": "none",
        "tasks": [{"id": t.id, "input": t.input} for t in tasks],
        "max_steps": settings.max_steps, "max_tokens": settings.max_tokens,
        "temperature": settings.temperature, "timeout": settings.timeout,
    }, ensure_ascii=False), encoding="utf-8")
    log_path = folder / f"stderr-{number}.log"
    finished: dict[str, dict[str, Any]] = {}
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(peer.python), str(HERE / "peers" / peer.script),
                                    str(job)], stdout=subprocess.PIPE, stderr=log,
                                   start_new_session=True, env={**os.environ,
                                                                "PYTHONUNBUFFERED": "1"})
        try:
            current, started, why = _follow(process, settings, finished, events)
        finally:
            kill_group(process)  # after a timeout, or on Ctrl-C: never left running
        code = process.wait()
    if current is not None and current not in finished:  # it crashed during this task
        finished[current] = {"status": "error", "final_answer": None,
                             "seconds": time.monotonic() - started,
                             "error": f"the runner exited with {code}; see {log_path}"}
    return finished, why or f"the runner exited with {code} before a task; see {log_path}"


def _follow(process: subprocess.Popen[bytes], settings: Settings,
            finished: dict[str, dict[str, Any]], events: dict[str, list[dict[str, Any]]]
            ) -> tuple[str | None, float, str]:
    """Read the runner's events until it ends or misses a deadline: the task it was on,
    when that began, and why it was killed, if it was."""
    assert process.stdout is not None
    lines = _lines(process.stdout)
    current: str | None = None
    started = time.monotonic()
    deadline = started + STARTUP
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            kill_group(process)
            if current is None:
                return None, started, "the runner did not start a task in time"
            finished[current] = {"status": "timeout", "final_answer": None,
                                 "seconds": time.monotonic() - started,
                                 "error": f"killed {GRACE:g} s past the timeout"}
            return current, started, ""
        if line is None:
            return current, started, ""
        event = _event(line)
        if event is None:
            continue
        if event["event"] == "start":
            current, started = event["task"], time.monotonic()
            deadline = started + settings.timeout + GRACE
        elif event["event"] == "result":
            finished[event["task"]] = event
            current, deadline = None, time.monotonic() + STARTUP
        elif event.get("task") in events:
            events[event["task"]].append(event)


def _lines(stream: IO[bytes]) -> queue.Queue[str | None]:
    """The stream's lines, read in a thread; None at its end."""
    found: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for raw in stream:
            found.put(raw.decode("utf-8", errors="replace"))
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    return found


def _event(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def kill_group(process: subprocess.Popen[Any]) -> None:
    """End the process and its children (it leads its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


def _peer_record(task: EvalTask, events: list[dict[str, Any]], outcome: dict[str, Any],
                 runtime: str, grader: Grader) -> dict[str, Any]:
    extra = outcome.get("extra") or {}
    internal = set(extra.get("internal_tools") or ())
    steps = _steps(events, internal)
    usage = TokenUsage()
    for step in steps:
        usage = usage + step.usage
    status = outcome.get("status")
    result = RunResult(status=status if status in STATUSES else "error",
                       reason=outcome.get("error") or str(status),
                       final_answer=outcome.get("final_answer"), steps=steps, usage=usage)
    calls = [{"name": r.call.name, "arguments": r.call.raw_arguments,
              "error": r.observation.output if r.observation and r.observation.is_error
              else None} for step in steps for r in step.calls]
    return grader.record(task, result, runtime, float(outcome.get("seconds") or 0.0),
                         error=outcome.get("error"), calls_raw=calls,
                         http_errors=[e for e in events if e["event"] == "http_error"],
                         framework=extra)


def _steps(events: list[dict[str, Any]], internal: set[str]) -> list[Step]:
    """One step per answered chat completion, with the calls of the reply and those the
    framework ran besides (see the module docstring)."""
    steps: list[Step] = []
    unmatched: list[CallRecord] = []
    for event in events:
        if event["event"] == "reply":
            body = {"choices": [{"message": event["message"],
                                 "finish_reason": event.get("finish_reason")}],
                    "usage": event.get("usage")}
            response = normalize_completion(body)
            records = [CallRecord(call=call) for call in response.tool_calls
                       if call.name not in internal]
            unmatched.extend(records)
            steps.append(Step(index=len(steps) + 1, raw_output=response.content,
                              calls=records, usage=response.usage))
        elif event["event"] == "tool":
            name, error = event["name"], event.get("error")
            record = next((r for r in unmatched if r.call.name == name), None)
            if record is None:
                arguments = event.get("arguments") or {}
                record = CallRecord(call=ToolCall(
                    id=f"ran-{len(steps)}-{name}", name=name, arguments=arguments,
                    raw_arguments=json.dumps(arguments, ensure_ascii=False, default=str)))
                if not steps:
                    steps.append(Step(index=1))
                steps[-1].calls.append(record)
            else:
                unmatched.remove(record)
            record.observation = Observation(call_id=record.call.id, tool_name=name,
                                             output=error or "", is_error=error is not None)
    return steps

"""The path of one tool call and its answer: which of miniagent's files run code, in order.

The scenario of issue 34: in process, a ``ScriptedModel`` that asks for one call of one
``@tool`` and then answers. A first run warms up (imports, the worker thread, first-use caches);
the second runs under ``sys.setprofile`` and ``threading.setprofile`` (installed before the
warm-up, so the worker thread the tool runs on is traced too) and records every Python function
called in a file of the ``miniagent`` package. ``tests/core/test_call_path.py`` bounds the count.

Prints the files in the order of their first call, each with its number of calls, then the
total. Usage: python benchmarks/call_path.py
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import miniagent
from miniagent import Agent, RunResult, ScriptedModel, tool

ROOT = Path(miniagent.__file__).resolve().parent
REPLIES = ['Thought: add\nAction: add\nAction Input: {"a": 2, "b": 3}',
           "Thought: done\nFinal Answer: 5"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class FileTracer:
    """A profile function that counts calls per miniagent file while ``recording``."""

    def __init__(self) -> None:
        self.recording = False
        self.calls: dict[str, int] = {}  # relative path -> calls, in order of the first call
        self._names: dict[str, str | None] = {}  # code file name -> relative path, or None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.recording or event != "call":
            return
        name = frame.f_code.co_filename
        relative = self._names.get(name, "")
        if relative == "":
            path = Path(name).resolve()
            relative = self._names[name] = (
                path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else None)
        if relative is not None:
            self.calls[relative] = self.calls.get(relative, 0) + 1


def call_path() -> tuple[RunResult, dict[str, int]]:
    """Run the scenario; its result and the calls per miniagent file, in order of first call."""
    tracer = FileTracer()
    threading.setprofile(tracer)  # threads started from now on (the tool's worker) carry it
    sys.setprofile(tracer)
    try:
        Agent(model=ScriptedModel(list(REPLIES)), tools=[add]).run("warm up")
        agent = Agent(model=ScriptedModel(list(REPLIES)), tools=[add])
        tracer.recording = True
        result = agent.run("What is 2+3?")
        tracer.recording = False
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return result, tracer.calls


def main() -> None:
    result, calls = call_path()
    print(f"run: {result.status}, answer {result.final_answer!r}")
    for relative, count in calls.items():
        print(f"  {relative:40} {count:4} calls")
    print(f"{len(calls)} files of src/miniagent ran code")


if __name__ == "__main__":
    main()

"""Built-in tools: current time and the bundle (calculator and files: their own files)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from miniagent import Agent, InMemoryStore, ScriptedModel
from miniagent.core.errors import ToolError
from miniagent.core.session import AgentSession
from miniagent.core.store.base import random_id
from miniagent.core.tools.builtin import builtin_tools, current_time
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import CallRecord, Message, Step, ToolCall

# -- time and the bundle -------------------------------------------------------------


def test_current_time_utc() -> None:
    stamp = datetime.fromisoformat(current_time())
    assert stamp.utcoffset() == timedelta(0)
    now = datetime.now(ZoneInfo("UTC"))
    assert abs((now - stamp).total_seconds()) < 60


def test_current_time_named_zone() -> None:
    try:
        ZoneInfo("Asia/Tokyo")
    except Exception:
        pytest.skip("no time zone database")
    assert datetime.fromisoformat(current_time("Asia/Tokyo")).utcoffset() == timedelta(hours=9)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd"])
def test_current_time_unknown_zone(zone: str) -> None:
    with pytest.raises(ToolError, match="Unknown time zone"):
        current_time(zone)


def test_builtin_tools_bundle(tmp_path: Path) -> None:
    tools = builtin_tools(tmp_path)
    names = [t.name for t in tools]
    assert names == ["calculator", "list_files", "count_file_lines", "read_file", "current_time"]
    assert len(ToolRegistry(tools)) == 5


def test_builtin_tools_are_idempotent(tmp_path: Path) -> None:
    """All only read: a crash during one must not need a person to resume (issue 12)."""
    registry = ToolRegistry(builtin_tools(tmp_path))
    assert {t.name: t.idempotent for t in registry} == dict.fromkeys(
        registry.names, True
    )


def test_only_the_calculator_runs_inline(tmp_path: Path) -> None:
    """Its every step's cost is bounded; the others read files or time zone data from disk."""
    assert {t.name: t.inline for t in builtin_tools(tmp_path)} == {
        "calculator": True, "list_files": False, "count_file_lines": False, "read_file": False,
        "current_time": False}


def test_list_files_interrupted_by_a_crash_is_rerun_on_resume(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    store = InMemoryStore()
    session = AgentSession.start("q", id=random_id(), at=time.time())
    call = ToolCall(id="c1", name="list_files", arguments={}, raw_arguments="{}")
    session.messages.append(Message(role="assistant", content="", tool_calls=[call]))
    session.steps.append(Step(index=1, calls=[CallRecord(call=call, state="started")]))
    session.phase = "tools"
    store.save(session)  # as a crash during list_files leaves it
    agent = Agent(model=ScriptedModel(["Final Answer: ok"]), tools=builtin_tools(tmp_path),
                  store=store)
    result = agent.resume(session.id)
    assert (result.status, result.final_answer) == ("completed", "ok")
    assert result.steps[0].observations[0].output == "a.txt"

"""Built-in tools: current time and the bundle (calculator and files: their own files)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from miniagent.errors import ToolError
from miniagent.tools.builtin import builtin_tools, current_time
from miniagent.tools.registry import ToolRegistry

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

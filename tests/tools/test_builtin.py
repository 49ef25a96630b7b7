"""Built-in tools: workspace-confined files, current time, the bundle (calculator: its own file)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from miniagent.errors import ToolDefinitionError, ToolError
from miniagent.tools.builtin import builtin_tools, current_time, workspace_tools
from miniagent.tools.registry import Tool, ToolRegistry
from miniagent.types import ToolCall

# -- workspace files -----------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("line 1\nline 2\nline 3\n", encoding="utf-8")
    (root / "notes.txt").write_text("你好\nworld", encoding="utf-8")
    (root / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret\n", encoding="utf-8")
    return root


def _tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root)}


def test_workspace_tool_names_and_file_path_parameter(workspace: Path) -> None:
    tools = _tools(workspace)
    assert list(tools) == ["list_files", "count_file_lines", "read_file"]
    assert tools["count_file_lines"].parameters["required"] == ["file_path"]
    assert tools["read_file"].parameters["required"] == ["file_path"]


def test_list_files(workspace: Path) -> None:
    list_files = _tools(workspace)["list_files"]
    assert list_files().splitlines() == ["empty.txt", "notes.txt", "src/"]
    assert list_files("src") == "main.py"
    (workspace / "src" / "sub").mkdir()
    assert "empty directory" in list_files("src/sub")
    with pytest.raises(ToolError, match="No such directory"):
        list_files("nope")
    with pytest.raises(ToolError, match="is a file"):
        list_files("notes.txt")


def test_count_file_lines(workspace: Path) -> None:
    count = _tools(workspace)["count_file_lines"]
    assert count("src/main.py") == 3
    assert count("notes.txt") == 2  # last line without a newline still counts
    assert count("empty.txt") == 0
    assert count(str(workspace / "src" / "main.py")) == 3  # absolute, but inside
    with pytest.raises(ToolError, match="No such file"):
        count("missing.txt")
    with pytest.raises(ToolError, match="not a file"):
        count("src")


def test_read_file(workspace: Path) -> None:
    read = _tools(workspace)["read_file"]
    assert read("src/main.py") == "line 1\nline 2\nline 3\n"
    assert read("notes.txt") == "你好\nworld"
    assert read("empty.txt") == "(empty file)"
    assert read("src/main.py", start_line=2, max_lines=1).startswith("line 2\n")
    assert "start_line=3" in read("src/main.py", start_line=2, max_lines=1)
    assert read("src/main.py", start_line=3) == "line 3\n"
    with pytest.raises(ToolError, match="past the end"):
        read("src/main.py", start_line=10)
    with pytest.raises(ToolError, match="start_line"):
        read("src/main.py", start_line=0)
    with pytest.raises(ToolError, match="max_lines"):
        read("src/main.py", max_lines=0)


def test_read_binary_file_refused(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        _tools(workspace)["read_file"]("blob.bin")


@pytest.mark.parametrize(
    "path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "{parent}/secret.txt"]
)
def test_paths_outside_workspace_refused(workspace: Path, path: str) -> None:
    tools = _tools(workspace)
    path = path.format(parent=workspace.parent)
    for name in ("count_file_lines", "read_file"):
        with pytest.raises(ToolError, match="outside the workspace"):
            tools[name](path)
    with pytest.raises(ToolError, match="outside the workspace"):
        tools["list_files"](path)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlink_escaping_workspace_refused(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to(workspace.parent / "secret.txt")
    (workspace / "outside").symlink_to(workspace.parent, target_is_directory=True)
    tools = _tools(workspace)
    with pytest.raises(ToolError, match="outside the workspace"):
        tools["read_file"]("link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        tools["list_files"]("outside")
    (workspace / "inside.txt").symlink_to(workspace / "notes.txt")
    assert tools["count_file_lines"]("inside.txt") == 2


async def test_workspace_escape_through_registry_is_error_observation(workspace: Path) -> None:
    registry = ToolRegistry(workspace_tools(workspace))
    obs = await registry.execute(
        ToolCall(id="1", name="read_file", arguments={"file_path": "../secret.txt"})
    )
    assert obs.is_error
    assert "outside the workspace" in obs.output
    assert "top secret" not in obs.output


def test_workspace_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ToolDefinitionError, match="not a directory"):
        workspace_tools(tmp_path / "missing")


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


def test_builtin_tools_bundle(workspace: Path) -> None:
    tools = builtin_tools(workspace)
    names = [t.name for t in tools]
    assert names == ["calculator", "list_files", "count_file_lines", "read_file", "current_time"]
    assert len(ToolRegistry(tools)) == 5

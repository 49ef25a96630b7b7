"""Workspace file tools: confinement, reading by bytes, names that are not UTF-8, bounds."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, ScriptedModel, SQLiteStore
from miniagent._internal import defaults
from miniagent.core.errors import ToolDefinitionError, ToolError
from miniagent.core.tools import workspace as workspace_module
from miniagent.core.tools.tool import Tool
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.tools.workspace import DEFAULT_READ_BYTES, MAX_READ_BYTES, workspace_tools
from miniagent.core.types import ToolCall
from tool_calls import execute

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
    obs = await execute(registry,
        ToolCall(id="1", name="read_file", arguments={"file_path": "../secret.txt"})
    )
    assert obs.is_error
    assert "outside the workspace" in obs.output
    assert "top secret" not in obs.output


def test_workspace_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ToolDefinitionError, match="not a directory"):
        workspace_tools(tmp_path / "missing")


# -- reading by bytes: memory stays small whatever the file --------------------------

MEMORY_BOUND = 16 << 20  # generous: the tools hold about one 64 KiB chunk


def peak_memory(call: Callable[[], Any]) -> tuple[Any, int]:
    """What ``call`` returns (or the ToolError it raises) and the peak traced memory."""
    was_tracing = tracemalloc.is_tracing()
    if was_tracing:
        tracemalloc.reset_peak()
    else:
        tracemalloc.start()
    try:
        try:
            result: Any = call()
        except ToolError as exc:
            result = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak


@pytest.fixture
def one_long_line(workspace: Path) -> Path:
    """50 MB of 'a' with no newline."""
    path = workspace / "long.txt"
    with path.open("wb") as handle:
        for _ in range(50):
            handle.write(b"a" * 1_000_000)
    return path


def test_read_file_of_one_huge_line_reads_bytes_not_the_line(
    workspace: Path, one_long_line: Path
) -> None:
    read = _tools(workspace)["read_file"]
    text, peak = peak_memory(lambda: read("long.txt", max_lines=1))
    assert peak < MEMORY_BOUND
    body, notice = text.split("\n... ")
    assert body == "a" * DEFAULT_READ_BYTES
    assert f"line 1 is longer than max_bytes={DEFAULT_READ_BYTES}" in notice
    assert "start_line=2" in notice
    assert len(text) <= defaults.MAX_OBSERVATION_CHARS  # the notice survives the runtime's cut
    text, peak = peak_memory(lambda: read("long.txt", max_bytes=10))
    assert (peak < MEMORY_BOUND, text.startswith("a" * 10 + "\n... (line 1 ")) == (True, True)


def test_skipping_and_counting_a_huge_line_stream(workspace: Path, one_long_line: Path) -> None:
    tools = _tools(workspace)
    error, peak = peak_memory(lambda: tools["read_file"]("long.txt", start_line=2))
    assert peak < MEMORY_BOUND
    assert isinstance(error, ToolError)
    assert "has 1 line; start_line 2 is past the end" in str(error)
    count, peak = peak_memory(lambda: tools["count_file_lines"]("long.txt"))
    assert (count, peak < MEMORY_BOUND) == (1, True)


def test_huge_sparse_file_is_scanned_within_the_budget(workspace: Path) -> None:
    path = workspace / "sparse.txt"
    with path.open("wb") as handle:  # text first (the binary sniff passes), then a hole
        handle.write(b"x" * 10_000 + b"\n" + b"y" * 10_000)
        handle.truncate(2 * 1024**3)  # 2 GiB of zeros, no disk used
    tools = _tools(workspace)
    error, peak = peak_memory(lambda: tools["count_file_lines"]("sparse.txt"))
    assert peak < MEMORY_BOUND
    assert isinstance(error, ToolError)
    assert "larger than the 1 GiB count_file_lines reads (2 GiB)" in str(error)
    assert "hold 1 line." in str(error)
    error, peak = peak_memory(lambda: tools["read_file"]("sparse.txt", start_line=3))
    assert peak < MEMORY_BOUND
    assert isinstance(error, ToolError) and "beyond the first 1 GiB" in str(error)
    text, peak = peak_memory(lambda: tools["read_file"]("sparse.txt", start_line=2))
    assert peak < MEMORY_BOUND and text.startswith("y" * DEFAULT_READ_BYTES + "\n... (")
    assert "line 2 is longer than" in text  # the zeros continue line 2


def test_zero_filled_sparse_file_is_refused_as_binary(workspace: Path) -> None:
    with (workspace / "zeros.bin").open("wb") as handle:
        handle.truncate(2 * 1024**3)
    error, peak = peak_memory(lambda: _tools(workspace)["read_file"]("zeros.bin", max_lines=1))
    assert peak < MEMORY_BOUND and "binary" in str(error)


def test_read_file_cuts_at_max_bytes_after_whole_lines(workspace: Path) -> None:
    (workspace / "many.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    read = _tools(workspace)["read_file"]
    text = read("many.txt", max_bytes=30)
    assert text.startswith("line 1\nline 2\nline 3\nline 4\n\n... (")
    assert "showing lines 1-4, 28 bytes: max_bytes=30 reached" in text
    assert "start_line=5" in text
    assert read("many.txt", start_line=5, max_lines=2).startswith("line 5\nline 6\n\n... (")
    full = read("many.txt", max_lines=2000, max_bytes=1 << 20)
    assert full == "".join(f"line {i}\n" for i in range(1, 1001))


def test_read_file_default_fits_one_observation(workspace: Path) -> None:
    (workspace / "wide.txt").write_text("".join(f"{i:08d} " + "x" * 70 + "\n" for i in range(500)))
    text = _tools(workspace)["read_file"]("wide.txt")
    assert len(text) <= defaults.MAX_OBSERVATION_CHARS
    assert "call read_file with start_line=" in text


def test_read_file_cut_keeps_characters_whole(workspace: Path) -> None:
    (workspace / "han.txt").write_text("你" * 5000, encoding="utf-8")
    text = _tools(workspace)["read_file"]("han.txt", max_bytes=100)
    assert text.split("\n")[0] == "你" * 33  # 99 bytes; the 34th character is not cut


def test_read_file_decodes_non_utf8_with_replacement(workspace: Path) -> None:
    (workspace / "latin1.txt").write_bytes(b"caf\xe9\n\xff\xfe ok\n")
    text = _tools(workspace)["read_file"]("latin1.txt")
    assert text == "caf\ufffd\n\ufffd\ufffd ok\n"
    text.encode("utf-8")


@pytest.mark.parametrize("max_bytes", [0, -1, MAX_READ_BYTES + 1])
def test_read_file_max_bytes_range(workspace: Path, max_bytes: int) -> None:
    with pytest.raises(ToolError, match="max_bytes must be between 1 and"):
        _tools(workspace)["read_file"]("notes.txt", max_bytes=max_bytes)


def test_read_file_schema_has_max_bytes(workspace: Path) -> None:
    properties = _tools(workspace)["read_file"].parameters["properties"]
    assert properties["max_bytes"]["default"] == DEFAULT_READ_BYTES


# -- names that are not UTF-8 ----------------------------------------------------------


@pytest.fixture
def latin1_workspace(workspace: Path) -> Path:
    raw = os.fsencode(workspace)
    try:
        with open(os.path.join(raw, b"caf\xe9.txt"), "wb") as handle:
            handle.write(b"one\ntwo\n")
        os.mkdir(os.path.join(raw, b"d\xe9j\xe0"))
        with open(os.path.join(raw, b"d\xe9j\xe0", b"n\xf6te"), "wb") as handle:
            handle.write(b"inside\n")
    except (OSError, UnicodeError):
        pytest.skip("the file system refuses names that are not UTF-8")
    return workspace


def test_list_files_shows_undecodable_bytes_escaped(latin1_workspace: Path) -> None:
    tools = _tools(latin1_workspace)
    listing = tools["list_files"]()
    listing.encode("utf-8")  # storable: no lone surrogates
    assert "caf\\xe9.txt" in listing.splitlines()
    assert "d\\xe9j\\xe0/" in listing.splitlines()
    assert tools["list_files"]("d\\xe9j\\xe0") == "n\\xf6te"


def test_escaped_names_are_accepted_back(latin1_workspace: Path) -> None:
    tools = _tools(latin1_workspace)
    assert tools["read_file"]("caf\\xe9.txt") == "one\ntwo\n"
    assert tools["count_file_lines"]("caf\\xe9.txt") == 2
    assert tools["read_file"]("d\\xe9j\\xe0/n\\xf6te") == "inside\n"
    (latin1_workspace / "d\udce9j\udce0" / "sub").mkdir()
    assert tools["list_files"]("d\\xe9j\\xe0/sub") == "(empty directory: d\\xe9j\\xe0/sub)"
    with pytest.raises(ToolError, match="No such file"):
        tools["read_file"]("caf\\xe8.txt")
    with pytest.raises(ToolError, match="No such file"):
        tools["read_file"]("caf\\x00.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        tools["read_file"]("..\\x2fsecret.txt")  # an escaped '/' still cannot leave


def test_a_literal_backslash_name_wins_over_the_unescaped_one(workspace: Path) -> None:
    (workspace / "x\\x41.txt").write_text("literal\n")
    (workspace / "xA.txt").write_text("unescaped\n")
    read = _tools(workspace)["read_file"]
    assert read("x\\x41.txt") == "literal\n"
    (workspace / "x\\x41.txt").unlink()
    assert read("x\\x41.txt") == "unescaped\n"


def test_control_characters_in_names_are_escaped(workspace: Path) -> None:
    try:
        (workspace / "two\nlines\x1b[2J.txt").write_text("ok\n")
    except OSError:
        pytest.skip("the file system refuses control characters in names")
    tools = _tools(workspace)
    assert "two\\x0alines\\x1b[2J.txt" in tools["list_files"]().splitlines()
    assert tools["read_file"]("two\\x0alines\\x1b[2J.txt") == "ok\n"


def test_latin1_name_through_an_agent_with_sqlite(latin1_workspace: Path, tmp_path: Path) -> None:
    model = ScriptedModel(["Thought: look\nAction: list_files\nAction Input: {}",
                           "Final Answer: done"])
    agent = Agent(model=model, tools=workspace_tools(latin1_workspace),
                  store=SQLiteStore(tmp_path / "s.db"))
    result = agent.run("What is in the workspace?")
    assert (result.status, result.final_answer) == ("completed", "done")
    assert "caf\\xe9.txt" in model.requests[1].messages[-1]["content"]


# -- list_files reads a bounded part of a directory -----------------------------------


def test_list_files_bounds_what_it_reads(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crowd = workspace / "crowd"
    crowd.mkdir()
    for i in range(60):
        (crowd / f"f{i:02d}").touch()
    list_files = _tools(workspace)["list_files"]
    monkeypatch.setattr(workspace_module, "MAX_LISTED", 10)
    lines = list_files("crowd").splitlines()
    assert lines == [f"f{i:02d}" for i in range(10)] + ["... (50 more entries)"]
    monkeypatch.setattr(workspace_module, "MAX_SCANNED_ENTRIES", 30)
    lines = list_files("crowd").splitlines()
    assert len(lines) == 11 and lines[:10] == sorted(lines[:10])
    assert "more than 30 entries" in lines[-1]

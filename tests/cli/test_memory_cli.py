"""`miniagent memory ...` as a person meets it: what each command prints and leaves in the file."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from miniagent import Memory
from miniagent.cli import app
from miniagent.cli.memory_cmd import default_memory_path


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, ["memory", *args], env={"COLUMNS": "120", **(env or {})})


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result.stdout


def one_line(result: Result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_add_search_list_in_chinese_and_english(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    file = ["--memory", str(path)]
    tokyo = ok(invoke("add", "用户住在东京，喜欢喝咖啡。", "--namespace", "zh",
                      "--metadata", '{"来源": "cli"}', *file)).strip()
    tea = ok(invoke("add", "The user drinks green tea.", *file)).strip()
    assert len(tokyo) == 16 and len(tea) == 16
    with Memory(path) as memory:  # what the file holds
        item = memory.get(tokyo)
        assert item is not None
        assert (item.text, item.namespace, item.metadata) == (
            "用户住在东京，喜欢喝咖啡。", "zh", {"来源": "cli"})
    lines = ok(invoke("search", "咖啡", *file)).splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{tokyo}  ")
    assert lines[0].endswith("  zh  用户住在东京，喜欢喝咖啡。")
    found = json.loads(ok(invoke("search", "green tea 东京", "-k", "1", "--json", *file)))
    assert len(found) == 1 and found[0]["id"] in (tokyo, tea) and found[0]["score"] > 0
    listed = json.loads(ok(invoke("list", "--json", *file)))
    assert [m["id"] for m in listed] == [tea, tokyo]
    assert [m["id"] for m in json.loads(ok(invoke("list", "-n", "zh", "--json", *file)))] == [
        tokyo]
    plain = ok(invoke("list", *file)).splitlines()
    assert plain[0].startswith(tea) and plain[1].endswith("zh  用户住在东京，喜欢喝咖啡。")


def test_delete_and_clear(tmp_path: Path) -> None:
    file = ["--memory", str(tmp_path / "m.db")]
    first = ok(invoke("add", "scratch one", "-n", "tmp", *file)).strip()
    ok(invoke("add", "scratch two", "-n", "tmp", *file))
    kept = ok(invoke("add", "kept", *file)).strip()
    assert ok(invoke("delete", first, *file)) == f"deleted {first}\n"
    assert one_line(invoke("delete", first, *file), 1) == (
        f"miniagent: no memory '{first}' in {tmp_path / 'm.db'}")
    assert ok(invoke("clear", "--namespace", "tmp", *file)) == (
        "deleted 1 memory from namespace 'tmp'\n")
    assert [m["id"] for m in json.loads(ok(invoke("list", "--json", *file)))] == [kept]
    assert ok(invoke("search", "scratch", "--json", *file)) == "[]\n"


def test_the_default_file_is_beside_the_session_store(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "data" / "sessions.db"
    monkeypatch.setenv("MINIAGENT_STORE", str(store))
    monkeypatch.delenv("MINIAGENT_MEMORY", raising=False)
    assert default_memory_path() == tmp_path / "data" / "memory.db"
    item_id = ok(invoke("add", "in the default file")).strip()
    path = tmp_path / "data" / "memory.db"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with Memory(path) as memory:
        assert memory.get(item_id) is not None
    other = tmp_path / "elsewhere.db"
    ok(invoke("add", "named by the variable", env={"MINIAGENT_MEMORY": str(other)}))
    with Memory(other) as memory:
        assert [i.text for i in memory.list()] == ["named by the variable"]


def test_reading_commands_create_no_file(tmp_path: Path) -> None:
    path = tmp_path / "none" / "memory.db"
    result = invoke("search", "anything", "--memory", str(path))
    assert ok(result) == "" and result.stderr == "no memories\n"
    assert ok(invoke("list", "--json", "--memory", str(path))) == "[]\n"
    assert ok(invoke("clear", "-n", "x", "--memory", str(path))).startswith("deleted 0 memories")
    assert not path.parent.exists()


@pytest.mark.parametrize(("args", "code", "message"), [
    (["add", "x", "--metadata", "[1]"], 2, "--metadata must be a JSON object"),
    (["add", "x", "--metadata", "{bad"], 2, "--metadata is not JSON"),
    (["add", "x" * 8001], 2, "8,001 characters; the most is 8,000"),
    (["add", "   "], 2, "empty"),
    (["search", "q", "-k", "0"], 2, "k must be an integer from 1 to 100"),
    (["search", "q" * 2001], 2, "the most is 2,000"),
])
def test_mistakes_are_one_line(tmp_path: Path, args: list[str], code: int,
                               message: str) -> None:
    path = tmp_path / "m.db"
    Memory(path).close()
    line = one_line(invoke(*args, "--memory", str(path)), code)
    assert line.startswith("miniagent: ") and message in line


def test_a_damaged_or_foreign_file_is_one_line(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"not sqlite at all\n" * 200)
    line = one_line(invoke("list", "--memory", str(damaged)), 1)
    assert f"memory file {damaged} cannot be read" in line
    sessions = tmp_path / "sessions.db"
    with sqlite3.connect(sessions) as db:
        db.execute("CREATE TABLE sessions (id TEXT)")
    line = one_line(invoke("add", "x", "--memory", str(sessions)), 2)
    assert "not a miniagent memory file" in line
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    line = one_line(invoke("add", "x", "--memory", str(blocked / "m.db")), 2)
    assert "cannot open the memory file" in line


def test_chinese_prints_in_a_real_terminal_process(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path) as memory:
        memory.add("她的猫叫小米。")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src"),
           "PYTHONIOENCODING": "utf-8"}
    out = subprocess.run([sys.executable, "-m", "miniagent", "memory", "search", "小米",
                          "--memory", str(path)], capture_output=True, env=env, timeout=60,
                         check=True)
    assert out.stdout.decode("utf-8").rstrip().endswith("default  她的猫叫小米。")

"""What the CLI prints from models, tools, servers and session files cannot drive the terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import miniagent
from miniagent.cli.safe_text import TERMINAL_CHARS, clip, json_text, markup, visible
from miniagent.testing.stub_server import StubServer

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # writes the clipboard
CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
C1_CSI = "\x9b31m"
BIDI = "\u202eevil\u202c \u2066x\u2069"
HOSTILE = f"{OSC52}{CLEAR}{TITLE}{C1_CSI}{BIDI}\r\x00\x7f"
UNSAFE = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\r", "\x00", "\x7f")


def test_visible_escapes_controls_and_keeps_newlines_and_tabs() -> None:
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible(CLEAR) == "\\x1b[2J\\x1b[H"
    assert visible(TITLE) == "\\x1b]0;pwned\\x07"
    assert visible("\x9b\x85\u202e\u2069\u200f\x7f\r") == (
        "\\x9b\\x85\\u202e\\u2069\\u200f\\x7f\\x0d")
    assert visible("\ud800 lone") == "\\ud800 lone"
    assert visible("plain, 北京, é, emoji 🙂") == "plain, 北京, é, emoji 🙂"


@pytest.mark.parametrize("text", [HOSTILE, "[bold]x[/bold]\\", "a\\[b]"])
def test_markup_prints_the_text_itself(text: str) -> None:
    from rich.console import Console

    console = Console(width=200, file=open(os.devnull, "w"), record=True)  # noqa: SIM115
    console.print(f"[dim]{markup(text)}[/dim] end")
    shown = console.export_text().rstrip("\n")
    assert shown == visible(text) + " end"
    assert not any(c in shown for c in UNSAFE)


def test_clip_says_how_much_was_cut_and_where_it_is_whole() -> None:
    assert clip("short", 10) == "short"
    cut = clip("x" * 1_000_000, 100)
    assert cut.startswith("x" * 100) and len(cut) < 200
    assert "999,900 more characters" in cut and "--json" in cut


def test_json_text_is_the_same_json_with_no_raw_control_characters() -> None:
    value = {"answer": HOSTILE + "\ud800", "n": 1}
    text = json_text(value)
    assert json.loads(text) == value
    assert not any(c in text for c in UNSAFE) and "\ud800" not in text
    assert json_text({"t": "北京"}) == '{"t": "北京"}'


def cli(*args: str, cwd: Path, store: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    source = str(Path(miniagent.__file__).parents[1])  # this checkout, from any folder
    return subprocess.run(
        [sys.executable, "-m", "miniagent", *args], capture_output=True, text=True,
        env={**env, "PYTHONPATH": source, "MINIAGENT_STORE": str(store), "COLUMNS": "200"},
        cwd=cwd, timeout=60,
        errors="surrogateescape",
    )


def assert_inert(out: subprocess.CompletedProcess[str]) -> None:
    for stream in (out.stdout, out.stderr):
        found = [c for c in UNSAFE if c in stream]
        assert not found, (found, stream)


def test_trace_show_list_and_hints_print_no_escape_sequences(tmp_path: Path) -> None:
    text = f"file says {HOSTILE} end\n".replace("\x00", "")  # NUL would make it binary
    (tmp_path / "notes.txt").write_text(text, encoding="utf-8")
    tools = tmp_path / "hostile_tools.py"
    tools.write_text(
        "from miniagent import tool\n\n"
        "@tool(requires_approval=True)\n"
        "def wipe(target: str) -> str:\n"
        '    """Wipe.\n\n    Args:\n        target: what\n    """\n'
        "    return 'wiped'\n", encoding="utf-8")
    args = json.dumps({"file_path": "notes.txt"})
    script = [
        f"Thought: {HOSTILE}\nAction: read_file\nAction Input: {args}",
        f"Thought: {HOSTILE}\nAction: no_such_tool_{TITLE}\nAction Input: {{}}",
        f"Action: wipe\nAction Input: {json.dumps({'target': HOSTILE})}",
        f"Thought: {HOSTILE}\nFinal Answer: {HOSTILE}",
    ]
    store = tmp_path / "s.db"
    with StubServer(script).run_in_thread() as stub:
        base = ["--base-url", stub.base_url, "--model", "m", "--mode", "react",
                "--tools", "builtin", "--tools", str(tools), "-v"]
        question = f"question {HOSTILE}".replace("\x00", "")  # argv cannot hold NUL
        run = cli("run", question, *base, cwd=tmp_path, store=store)
        assert run.returncode == 3, run.stderr
        assert "file says" in run.stdout and "awaiting approval" in run.stdout
        assert_inert(run)
        session_id = json.loads(cli("sessions", "list", "--json", cwd=tmp_path,
                                    store=store).stdout)[0]["session_id"]
        assert_inert(cli("sessions", "approve", session_id, cwd=tmp_path, store=store))
        resumed = cli("sessions", "resume", session_id, "--base-url", stub.base_url,
                      cwd=tmp_path, store=store)
    assert resumed.returncode == 0, resumed.stderr
    assert_inert(resumed)
    for command in (["list"], ["list", "--json"], ["show", session_id],
                    ["show", session_id, "--json"]):
        shown = cli("sessions", *command, cwd=tmp_path, store=store)
        assert shown.returncode == 0, shown.stderr
        assert_inert(shown)
    show = cli("sessions", "show", session_id, cwd=tmp_path, store=store).stdout
    assert "\\x1b]52;c;" in show and "\\x1b[2J" in show and "\\x1b]0;pwned\\x07" in show


def test_a_huge_final_answer_is_clipped_on_the_terminal_and_whole_in_json(tmp_path: Path) -> None:
    answer = "word " * 400_000  # 2 MB
    store = tmp_path / "s.db"
    with StubServer(lambda _data, _n: f"Final Answer: {answer}").run_in_thread() as stub:
        base = ["--base-url", stub.base_url, "--model", "m", "--mode", "react"]
        shown = cli("run", "q", *base, cwd=tmp_path, store=store)
        whole = cli("run", "q", *base, "--json", cwd=tmp_path, store=store)
    assert shown.returncode == 0 and whole.returncode == 0, shown.stderr + whole.stderr
    assert len(shown.stdout) < 100_000
    cut = len(answer.strip()) - TERMINAL_CHARS
    assert f"{cut:,} more characters not shown" in shown.stdout and "--json" in shown.stdout
    result = json.loads(whole.stdout)
    assert result["final_answer"] == answer.strip()
    session_id = result["session_id"]
    show = cli("sessions", "show", session_id, cwd=tmp_path, store=store)
    assert len(show.stdout) < 100_000 and "more characters not shown" in show.stdout
    show_json = cli("sessions", "show", session_id, "--json", cwd=tmp_path, store=store)
    assert answer.strip() in show_json.stdout


def test_a_terminal_that_cannot_encode_the_text_gets_escapes_not_a_traceback(
        tmp_path: Path) -> None:
    from miniagent import Agent, ScriptedModel
    from miniagent.core.store.sqlite import SQLiteStore

    store = tmp_path / "s.db"
    model = ScriptedModel(["Final Answer: 北京今天多云 🙂"])
    session_id = Agent(model=model, store=SQLiteStore(store)).run("北京天气?").session_id
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), MINIAGENT_STORE=str(store),
               PYTHONIOENCODING="latin-1")
    for args, stdin in ((["sessions", "list"], ""), (["sessions", "show", session_id], ""),
                        (["sessions", "list", "--json"], ""),
                        (["sessions", "show", session_id, "--json"], ""),
                        (["parse"], "Final Answer: 北京 🙂")):
        out = subprocess.run([sys.executable, "-m", "miniagent", *args], input=stdin.encode(),
                             capture_output=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr.decode(errors="replace")
        assert out.stderr == b""
        if "--json" in args or args == ["parse"]:
            parsed = json.loads(out.stdout.decode("latin-1"))
            assert "北京" in json.dumps(parsed, ensure_ascii=False)
        else:
            assert b"\\u5317" in out.stdout  # 北, escaped

"""`miniagent chat`, the real command in a real pseudo-terminal, against the stub server."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import miniagent
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.testing.stub_server import Fault, Reply, StubServer

pexpect = pytest.importorskip("pexpect")
pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="a POSIX terminal"),
              pytest.mark.timeout(300)]

PROMPT = "you> "
WAIT = 30
"""Seconds any one expected output may take (a bound, not a measure)."""
SESSION = re.compile(r"session ([0-9a-f]{16})")

APPROVAL_TOOLS = '''
from miniagent import tool


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"
'''


SLOW_TOOLS = '''
import time

from miniagent import tool


@tool
def wait_long() -> str:
    """Wait a long time."""
    time.sleep(120)
    return "done"
'''


class Chat:
    """One ``miniagent chat`` process in a pseudo-terminal."""

    def __init__(self, child: Any) -> None:
        self.child = child

    def line(self, text: str) -> str:
        """Type ``text`` and Enter; what the chat printed until it prompts again."""
        self.child.sendline(text)
        return self.wait_prompt()

    def wait_prompt(self) -> str:
        self.child.expect_exact(PROMPT)
        return str(self.child.before)

    def expect(self, text: str) -> str:
        self.child.expect_exact(text)
        return str(self.child.before)

    def leave(self, how: str = "/exit") -> int:
        """Leave with ``/exit`` (or Ctrl-D: ``how=""``); the exit status."""
        if how:
            self.child.sendline(how)
        else:
            self.child.sendeof()
        self.child.expect(pexpect.EOF)
        self.child.close()
        return int(self.child.exitstatus)


@contextmanager
def chat(stub: StubServer, tmp_path: Path, *args: str, history: Path | None = None
         ) -> Iterator[Chat]:
    """``miniagent chat`` on ``stub`` (react mode, the store in ``tmp_path``); stopped at the
    end whatever happened."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), NO_COLOR="1",
               TERM="xterm", LC_ALL="C.UTF-8", COLUMNS="120", XDG_DATA_HOME=str(tmp_path),
               MINIAGENT_CHAT_HISTORY=str(history or tmp_path / "chat_history"))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "miniagent", "chat", "--base-url", stub.base_url, "--model", "m", "--mode",
         "react", "--store", str(tmp_path / "sessions.db"), *args],
        env=env, encoding="utf-8", timeout=WAIT, dimensions=(50, 120),
        # a shell running the tests in the background ignores SIGINT; children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    session = Chat(child)
    try:
        session.wait_prompt()
        yield session
    finally:
        if child.isalive():
            child.terminate(force=True)
        child.close()


def answers(replies: dict[str, Reply]) -> Callable[[dict[str, Any], int], Reply]:
    """A stub that answers each request by the first key found in its last message (the
    question, or an observation)."""

    def reply(data: dict[str, Any], _n: int) -> Reply:
        asked = str(data["messages"][-1]["content"])
        for question, answer in replies.items():
            if question in asked:
                return answer
        return f"Final Answer: nothing scripted for {asked!r}"

    return reply


def sent(request: dict[str, Any]) -> str:
    """Everything a request's messages carried, as one text."""
    return json.dumps(request["messages"], ensure_ascii=False)


def test_each_line_is_the_next_turn_of_one_conversation(tmp_path: Path) -> None:
    script = answers({
        "capital of France": "Final Answer: Paris is the capital of France.",
        "How many people": "Final Answer: About 2.1 million people live in Paris.",
        "And Lyon": "Final Answer: Lyon has about 520,000.",
    })
    with StubServer(script).run_in_thread() as stub:
        with chat(stub, tmp_path) as session:
            first = session.line("What is the capital of France?")
            assert "Paris is the capital of France." in first
            assert "About 2.1 million" in session.line("How many people live there?")
            assert "520,000" in session.line("And Lyon?")
            assert session.leave() == 0
        received = list(stub.requests)
    assert len(received) == 3
    second, third = sent(received[1]), sent(received[2])
    assert "What is the capital of France?" in second
    assert "Paris is the capital of France." in second  # turn 1's answer
    assert "About 2.1 million" in third and "capital of France" in third
    (session_id,) = SESSION.findall(first)
    saved = SQLiteStore(tmp_path / "sessions.db").load(session_id)
    assert [t.question for t in saved.turns] == [
        "What is the capital of France?", "How many people live there?", "And Lyon?"]


def test_new_starts_a_fresh_session_and_sessions_lists_them(tmp_path: Path) -> None:
    script = answers({"first topic": "Final Answer: one", "second topic": "Final Answer: two"})
    with StubServer(script).run_in_thread() as stub:
        with chat(stub, tmp_path) as session:
            (first,) = SESSION.findall(session.line("the first topic"))
            assert "new session" in session.line("/new")
            (second,) = SESSION.findall(session.line("the second topic"))
            session.line("a follow-up")
            listed = session.line("/sessions")
            assert session.leave() == 0
        received = list(stub.requests)
    assert first != second
    assert "first topic" not in sent(received[1])  # the new session starts afresh
    for session_id, question, turns in ((first, "the first topic", "1"),
                                        (second, "the second topic", "2")):
        row = next(line for line in listed.splitlines() if session_id in line)
        assert "completed" in row and question in row
        assert row.split("│")[3].strip() == turns  # id, status, turns


def test_resume_continues_a_session_of_an_earlier_chat(tmp_path: Path) -> None:
    script = answers({"remember 42": "Final Answer: noted, 42.",
                      "which number": "Final Answer: it was 42."})
    with StubServer(script).run_in_thread() as stub:
        with chat(stub, tmp_path) as session:
            (session_id,) = SESSION.findall(session.line("remember 42"))
            assert session.leave("") == 0  # Ctrl-D
        with chat(stub, tmp_path) as session:
            assert "the next line continues it" in session.line(f"/resume {session_id[:6]}")
            assert "it was 42." in session.line("which number did I say?")
            assert session.leave() == 0
        received = list(stub.requests)
    assert "noted, 42." in sent(received[1])


def test_an_approval_is_asked_inline_and_resume_asks_it_again(tmp_path: Path) -> None:
    """Ctrl-C at the approval question stops the turn (the call keeps waiting) and the next
    line is the chat's, not the question's; /resume asks it again."""
    tools = tmp_path / "tools.py"
    tools.write_text(APPROVAL_TOOLS, encoding="utf-8")
    script = answers({"Observation": "Final Answer: a.txt is gone.",
                      "delete a.txt": 'Thought: delete it\nAction: delete_file\n'
                                      'Action Input: {"path": "a.txt"}'})
    with StubServer(script).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", str(tools)) as session:
        session.child.sendline("delete a.txt please")
        session.expect("Run it?")
        session.child.sendintr()
        session.expect("turn stopped; the session is kept")
        session.wait_prompt()
        listed = session.line("/sessions")
        assert "awaiting_approval" in listed
        (session_id,) = re.findall(r"[0-9a-f]{16}", listed)
        session.child.sendline(f"/resume {session_id}")
        session.expect("Run it?")
        resumed = session.line("y")
        assert "deleted a.txt" in resumed and "a.txt is gone." in resumed
        assert session.leave() == 0


def test_a_decision_made_in_another_shell_is_taken_at_the_approval_prompt(
        tmp_path: Path) -> None:
    """While the chat asks y/n (holding the session's lease), ``sessions approve`` from a
    second process records the decision, and the chat goes on with it: the tool runs once,
    the turn completes."""
    from test_cli import cli

    tools = tmp_path / "tools.py"
    tools.write_text(APPROVAL_TOOLS, encoding="utf-8")
    store = tmp_path / "sessions.db"
    script = answers({"Observation": "Final Answer: a.txt is gone.",
                      "delete a.txt": 'Thought: delete it\nAction: delete_file\n'
                                      'Action Input: {"path": "a.txt"}'})
    with StubServer(script).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", str(tools)) as session:
        session.child.sendline("delete a.txt please")
        (session_id,) = SESSION.findall(session.expect("Run it?"))
        approved = cli("sessions", "approve", session_id, "--store", str(store),
                       "--reason", "ok from the second shell")
        assert approved.returncode == 0, approved.stderr
        assert "the process waiting for this decision goes on with it" in approved.stdout
        session.expect("decided in another process")
        after = session.wait_prompt()
        assert "deleted a.txt" in after and "a.txt is gone." in after
        assert session.leave() == 0
    saved = SQLiteStore(store).load(session_id)
    assert saved.status == "completed" and saved.final_answer == "a.txt is gone."
    (record,) = saved.steps[0].calls
    assert (record.state, record.note) == ("completed", "ok from the second shell")
    assert record.observation is not None and record.observation.output == "deleted a.txt"


def test_an_edited_approval_from_another_shell_reaches_the_waiting_chat(
        tmp_path: Path) -> None:
    """Through the decision door: the chat waiting at its prompt takes the person's arguments
    with the approval, runs the tool with them and keeps both in the saved session."""
    from test_cli import cli

    tools = tmp_path / "tools.py"
    tools.write_text(APPROVAL_TOOLS, encoding="utf-8")
    store = tmp_path / "sessions.db"
    script = answers({"Observation": "Final Answer: b.txt is gone.",
                      "delete a.txt": 'Thought: delete it\nAction: delete_file\n'
                                      'Action Input: {"path": "a.txt"}'})
    with StubServer(script).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", str(tools)) as session:
        session.child.sendline("delete a.txt please")
        (session_id,) = SESSION.findall(session.expect("Run it?"))
        call_id = SQLiteStore(store).load(session_id).steps[0].calls[0].call.id
        approved = cli("sessions", "approve", session_id, "--call", call_id, "--arguments",
                       '{"path": "b.txt"}', "--store", str(store))
        assert approved.returncode == 0, approved.stderr
        session.expect("decided in another process")
        after = session.wait_prompt()
        assert "deleted b.txt" in after and "b.txt is gone." in after
        assert session.leave() == 0
    (record,) = SQLiteStore(store).load(session_id).steps[0].calls
    assert (record.call.arguments, record.edited_arguments) == ({"path": "a.txt"},
                                                                {"path": "b.txt"})
    assert record.observation is not None
    assert record.observation.output.endswith("\ndeleted b.txt")


def test_a_chat_killed_at_the_approval_prompt_waits_for_no_decision(tmp_path: Path) -> None:
    """The chat is SIGKILLed while it asks y/n (its lease and decision door stay in the
    store): ``sessions approve`` records the decision as for a session nobody holds, and says
    how to resume it instead of promising that a process goes on with it."""
    from test_cli import cli

    tools = tmp_path / "tools.py"
    tools.write_text(APPROVAL_TOOLS, encoding="utf-8")
    store = tmp_path / "sessions.db"
    script = answers({"delete a.txt": 'Thought: delete it\nAction: delete_file\n'
                                      'Action Input: {"path": "a.txt"}'})
    with StubServer(script).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", str(tools)) as session:
        session.child.sendline("delete a.txt please")
        (session_id,) = SESSION.findall(session.expect("Run it?"))
        session.child.kill(signal.SIGKILL)
        session.child.expect(pexpect.EOF)
        session.child.wait()  # reaped: its pid is not running
    approved = cli("sessions", "approve", session_id, "--store", str(store))
    assert approved.returncode == 0, approved.stderr
    assert "goes on with it" not in approved.stdout
    assert "continue with:" in approved.stdout and f"resume {session_id}" in approved.stdout
    (record,) = SQLiteStore(store).load(session_id).steps[0].calls
    assert record.state == "approved"


def test_tools_lists_the_agents_tools(tmp_path: Path) -> None:
    with StubServer([]).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", "builtin") as session:
        listed = session.line("/tools")
        assert session.leave() == 0
    assert "calculator" in listed and "Evaluate an arithmetic expression" in listed
    assert "read_file" in listed


def test_ctrl_c_stops_a_slow_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    script = answers({"slow question": Fault(status=200, delay=120),
                      "quick question": "Final Answer: quick answer"})
    with StubServer(script).run_in_thread() as stub, chat(stub, tmp_path) as session:
        session.child.sendline("a slow question")
        session.expect("waiting for the model")
        session.child.sendintr()
        session.expect("turn stopped; the session is kept")
        session.wait_prompt()
        session.line("/new")
        assert "quick answer" in session.line("a quick question")
        assert session.leave() == 0


def test_ctrl_c_during_a_tool_call_says_how_to_finish_the_turn(tmp_path: Path) -> None:
    tools = tmp_path / "tools.py"
    tools.write_text(SLOW_TOOLS, encoding="utf-8")
    script = answers({"wait": "Thought: wait\nAction: wait_long\nAction Input: {}"})
    with StubServer(script).run_in_thread() as stub, \
            chat(stub, tmp_path, "--tools", str(tools)) as session:
        session.child.sendline("please wait")
        session.expect("wait_long {}")
        session.child.sendintr()
        session.expect("turn stopped; the session is kept")
        hint = session.wait_prompt()
        assert "a tool call was under way: /resume" in hint
        # refused: the call still runs, and its result will be kept
        assert "is being run by this process" in session.line("another question")
        assert session.leave() == 0


def test_after_a_stopped_turn_the_next_line_continues_the_conversation(tmp_path: Path) -> None:
    script = answers({"slow question": Fault(status=200, delay=120),
                      "go on": "Final Answer: going on"})
    with StubServer(script).run_in_thread() as stub:
        with chat(stub, tmp_path) as session:
            session.child.sendline("a slow question")
            session.expect("waiting for the model")
            session.child.sendintr()
            session.expect("turn stopped; the session is kept")
            session.wait_prompt()
            assert "going on" in session.line("go on")
            assert session.leave() == 0
        received = list(stub.requests)
    assert "a slow question" in sent(received[-1])


def test_ctrl_c_at_the_prompt_drops_the_line_and_ctrl_d_leaves(tmp_path: Path) -> None:
    with StubServer([]).run_in_thread() as stub:
        with chat(stub, tmp_path) as session:
            session.child.send("a line never sent")
            # as a person would: Ctrl-C once the line shows (a signal that lands before
            # readline waits for input is only seen at the next Enter: CPython's readline)
            session.expect("a line never sent")
            session.child.sendintr()
            session.wait_prompt()
            assert "unknown command /frobnicate" in session.line("/frobnicate")
            assert "/resume ID" in session.line("/help")
            assert session.leave("") == 0
        assert stub.requests == []


def test_chinese_in_and_out_and_the_history_file(tmp_path: Path) -> None:
    history = tmp_path / "history"
    earlier = [f"earlier line {n}" for n in range(1100)] + ["巴黎是哪个国家的首都？"]
    history.write_text("\n".join(earlier) + "\n", encoding="utf-8")
    script = answers({"巴黎": "Final Answer: 巴黎是法国的首都。",
                      "答案是什么": "Final Answer: 答案是：法国。"})
    with StubServer(script).run_in_thread() as stub:
        with chat(stub, tmp_path, history=history) as session:
            session.child.send("\x1b[A")  # the up arrow: the last line of the history
            shown = session.line("")
            assert "巴黎是法国的首都。" in shown
            assert "答案是：法国。" in session.line("答案是什么？")
            assert session.leave("") == 0
        received = list(stub.requests)
    assert "巴黎是哪个国家的首都？" in sent(received[0])
    assert "答案是什么？" in sent(received[1]) and "巴黎是法国的首都。" in sent(received[1])
    kept = history.read_text(encoding="utf-8").splitlines()
    assert kept[-2:] == ["巴黎是哪个国家的首都？", "答案是什么？"]
    assert len(kept) <= 1001  # bounded (libedit adds a header line)


def test_temporal_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from miniagent.cli import app

    out = CliRunner().invoke(app, ["chat", "--temporal", "127.0.0.1:7233"])
    assert out.exit_code == 2
    assert "--temporal is not supported" in out.stderr


def test_chat_takes_every_option_run_does() -> None:
    from typer.testing import CliRunner

    from miniagent.cli import app

    run_help = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).stdout
    chat_help = CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "200"}).stdout
    own = {"--detach", "--json", "--continue", "--output-schema"}  # for scripts, not a person
    flags = set(re.findall(r"^\s+(--[a-z-]+)", run_help, re.M)) - own - {"--help"}
    assert len(flags) > 25
    assert flags <= set(re.findall(r"^\s+(--[a-z-]+)", chat_help, re.M))


def test_lines_piped_in_are_answered_and_not_kept(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), COLUMNS="120",
               MINIAGENT_CHAT_HISTORY=str(tmp_path / "history"))
    with StubServer(["Final Answer: piped answer"]).run_in_thread() as stub:
        out = subprocess.run(
            [sys.executable, "-m", "miniagent", "chat", "--base-url", stub.base_url, "--model",
             "m", "--mode", "react", "--store", str(tmp_path / "s.db")],
            input="a piped question\n", capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "piped answer" in out.stdout
    assert not (tmp_path / "history").exists()

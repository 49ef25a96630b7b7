"""`miniagent sessions ...` as a person meets it: ids by prefix, what each command says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from miniagent import Agent, ScriptedModel, tool
from miniagent.cli import app
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.testing.stub_server import StubServer

TOOLS = '''
from miniagent import tool


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something.

    Args:
        target: what to wipe
    """
    return "wiped " + target
'''


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something.

    Args:
        target: what to wipe
    """
    return "wiped " + target


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["sessions", *args], env={"COLUMNS": "120"})


def one_line(result: Result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def waiting(store: Path, session_id: str) -> str:
    """A session in ``store`` awaiting approval of one call of ``wipe``."""
    model = ScriptedModel(['Thought: x\nAction: wipe\nAction Input: {"target": "disk"}'])
    agent = Agent(model=model, tools=[wipe], store=SQLiteStore(store))
    result = agent.run("wipe it", session_id=session_id)
    assert result.status == "awaiting_approval"
    return result.pending_approvals[0].call_id


def finished(store: Path, session_id: str) -> None:
    agent = Agent(model=ScriptedModel(["Final Answer: 42"]), store=SQLiteStore(store))
    assert agent.run("6*7?", session_id=session_id).status == "completed"


def test_every_sessions_command_takes_a_unique_prefix(tmp_path: Path) -> None:
    store, tools = tmp_path / "s.db", tmp_path / "wipe_tools.py"
    tools.write_text(TOOLS, encoding="utf-8")
    where = ("--store", str(store))
    call_id = waiting(store, "3f2a90c1aaaa")
    waiting(store, "77aa01bbbb")
    waiting(store, "9e9e01cccc")
    finished(store, "3f2b00dddd")

    assert "Session 3f2a90c1aaaa" in invoke("show", "3f2a9", *where).stdout
    assert json.loads(invoke("show", "3f2b", "--json", *where).stdout)["id"] == "3f2b00dddd"
    approved = invoke("approve", "3f2a9", *where)
    assert approved.exit_code == 0, approved.output
    assert f"approved {call_id} in session 3f2a90c1aaaa" in approved.stdout
    denied = invoke("deny", "77aa", "--reason", "no", *where)
    assert "in session 77aa01bbbb" in denied.stdout, denied.output
    cancelled = invoke("cancel", "9e9e0", *where)
    assert cancelled.stdout.strip() == "cancelled session 9e9e01cccc", cancelled.output
    with StubServer(["Final Answer: wiped"]).run_in_thread() as stub:
        resumed = invoke("resume", "3f2a9", "--base-url", stub.base_url, "--model", "m",
                         "--mode", "react", "--tools", str(tools), "--json", *where)
    assert resumed.exit_code == 0, resumed.output
    result = json.loads(resumed.stdout)
    assert (result["session_id"], result["final_answer"]) == ("3f2a90c1aaaa", "wiped")
    assert result["trace"][0]["observations"][0]["output"] == "wiped disk"
    statuses = {s.session_id: s.status for s in SQLiteStore(store).list()}
    assert statuses == {"3f2a90c1aaaa": "completed", "77aa01bbbb": "awaiting_approval",
                        "9e9e01cccc": "cancelled", "3f2b00dddd": "completed"}


@pytest.mark.parametrize("command", [["show"], ["show", "--json"], ["approve"], ["deny"],
                                     ["cancel"], ["resume", "--base-url", "http://127.0.0.1:1/v1"]])
def test_an_ambiguous_or_unknown_prefix_is_one_line(tmp_path: Path, command: list[str]) -> None:
    store = tmp_path / "s.db"
    waiting(store, "3f2a90c1aaaa")
    finished(store, "3f2a77dddd")
    name, *options = command
    where = ("--store", str(store))
    line = one_line(invoke(name, "3f2a", *options, *where), 2)
    assert line == (f"miniagent: session id '3f2a' is ambiguous: 2 sessions in {store} begin "
                    "with it (3f2a77dddd, 3f2a90c1aaaa); give more characters")
    line = one_line(invoke(name, "3f", *options, *where), 2)
    assert "a prefix of a session id needs at least 4 characters" in line
    line = one_line(invoke(name, "3f2c", *options, *where), 1)
    assert line == f"miniagent: no session '3f2c' in {store}"
    statuses = {s.session_id: s.status for s in SQLiteStore(store).list()}
    assert statuses == {"3f2a90c1aaaa": "awaiting_approval", "3f2a77dddd": "completed"}


def test_resuming_a_session_that_has_ended_says_its_status_and_why(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    where = ("--store", str(store))
    finished(store, "3f2b00dddd")
    waiting(store, "9e9e01cccc")
    assert invoke("cancel", "9e9e01cccc", "--reason", "not today", *where).exit_code == 0
    done = invoke("resume", "3f2b00dddd", *where)  # no model is needed to say so
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == (
        "Session 3f2b00dddd has ended (completed: the model gave a final answer); there is "
        "nothing to resume: it has its final answer. See it with:\n"
        f"miniagent sessions show 3f2b00dddd --store {store}")  # a command on its own line
    cancelled = invoke("resume", "9e9e01cccc", *where)
    assert cancelled.exit_code == 1, cancelled.output
    assert cancelled.stdout.startswith("Session 9e9e01cccc has ended (cancelled: not today); "
                                       "there is nothing to resume: a cancelled session stays "
                                       "ended."), cancelled.stdout
    as_json = json.loads(invoke("resume", "9e9e01cccc", "--json", *where).stdout)
    assert (as_json["status"], as_json["reason"]) == ("cancelled", "not today")


@pytest.mark.parametrize("command", ["approve", "deny", "cancel"])
def test_deciding_or_cancelling_a_session_that_has_ended_says_its_status(
        tmp_path: Path, command: str) -> None:
    store = tmp_path / "s.db"
    finished(store, "3f2b00dddd")
    line = one_line(invoke(command, "3f2b00dddd", "--store", str(store)), 2)
    assert line == ("miniagent: session 3f2b00dddd has ended (completed: the model gave a final "
                    f"answer); there is nothing to {command}")


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_deciding_a_session_that_waits_for_nothing_says_how_to_go_on(
        tmp_path: Path, command: str) -> None:
    import time

    from miniagent.core.session import AgentSession

    store = tmp_path / "s.db"
    session = AgentSession.start("q", id="5a5a0000", at=time.time())
    session.transition("timeout", "the run took longer than 60 s", at=time.time())
    SQLiteStore(store).save(session)
    line = one_line(invoke(command, "5a5a0000", "--store", str(store)), 2)
    assert line == ("miniagent: session 5a5a0000 is not awaiting approval (timeout: the run took "
                    "longer than 60 s): no call waits for a decision; continue it with: "
                    f"miniagent sessions resume 5a5a0000 --store {store}")


def test_a_denied_call_reads_as_denied_in_every_output(tmp_path: Path) -> None:
    store, tools = tmp_path / "s.db", tmp_path / "wipe_tools.py"
    tools.write_text(TOOLS, encoding="utf-8")
    where = ("--store", str(store))
    denied_id = waiting(store, "3f2a90c1aaaa")
    approved_id = waiting(store, "77aa01bbbb")
    assert invoke("deny", "3f2a90c1aaaa", "--reason", "not this disk", *where).exit_code == 0
    assert invoke("approve", "77aa01bbbb", *where).exit_code == 0
    run = ("--model", "m", "--mode", "react", "--tools", str(tools), *where)
    with StubServer(["Final Answer: left alone", "Final Answer: wiped"]).run_in_thread() as stub:
        as_json = invoke("resume", "3f2a90c1aaaa", "--json", "--base-url", stub.base_url, *run)
        as_text = invoke("resume", "77aa01bbbb", "--base-url", stub.base_url, *run)
    assert as_json.exit_code == 0 and as_text.exit_code == 0, (as_json.output, as_text.output)
    (call,) = json.loads(as_json.stdout)["trace"][0]["tool_calls"]
    assert (call["id"], call["state"], call["outcome"]) == (denied_id, "completed", "denied")
    assert f'Approved: wipe {{"target": "disk"}} ({approved_id}); it runs now' in as_text.stdout

    shown = json.loads(invoke("show", "3f2a90c1aaaa", "--json", *where).stdout)
    (saved_call,) = shown["steps"][0]["calls"]
    assert (saved_call["state"], saved_call["outcome"]) == ("completed", "denied")
    text = invoke("show", "3f2a90c1aaaa", *where).stdout
    assert f"({denied_id}: denied, not run — not this disk)" in text
    (ran,) = json.loads(invoke("show", "77aa01bbbb", "--json", *where).stdout)["steps"][0]["calls"]
    assert (ran["outcome"], ran["observation"]["output"]) == ("ran", "wiped disk")


def test_resume_says_what_it_does_with_a_denied_call(tmp_path: Path) -> None:
    store, tools = tmp_path / "s.db", tmp_path / "wipe_tools.py"
    tools.write_text(TOOLS, encoding="utf-8")
    call_id = waiting(store, "3f2a90c1aaaa")
    assert invoke("deny", "3f2a90c1aaaa", "--reason", "不要", "--store", str(store)).exit_code == 0
    with StubServer(["Final Answer: left alone"]).run_in_thread() as stub:
        out = invoke("resume", "3f2a90c1aaaa", "--base-url", stub.base_url, "--model", "m",
                     "--mode", "react", "--tools", str(tools), "--store", str(store))
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == "Question: wipe it"
    assert lines[1] == (f'Denied (不要): wipe {{"target": "disk"}} ({call_id}); it is '
                                    "not run, and the model is told why")


def test_approve_with_edited_arguments_checks_them_then_runs_them(tmp_path: Path) -> None:
    """``--arguments`` on a real SQLite file: a bad edit is one line and decides nothing; a
    good one is what the tool runs with, and every output shows both."""
    store, tools = tmp_path / "s.db", tmp_path / "wipe_tools.py"
    tools.write_text(TOOLS, encoding="utf-8")
    where = ("--store", str(store))
    call_id = waiting(store, "3f2a90c1aaaa")
    before = SQLiteStore(store).load("3f2a90c1aaaa").to_dict()
    for edit, said in [('{"target": 7}', "target: 7 is not of type 'string'"),
                       ('{"aim": "tmp"}', "'target' is a required property"),
                       ("{target: tmp}", "--arguments is not valid JSON"),
                       ('["tmp"]', "--arguments must be a JSON object, not list")]:
        refused = invoke("approve", "3f2a9", "--call", call_id, "--arguments", edit, *where)
        assert said in one_line(refused, 2)
    assert SQLiteStore(store).load("3f2a90c1aaaa").to_dict() == before

    approved = invoke("approve", "3f2a9", "--call", call_id, "--arguments",
                      '{"target": "/tmp/スクラッチ"}', *where)
    assert approved.exit_code == 0, approved.output
    assert approved.stdout.startswith(
        f"approved {call_id} with your arguments in session 3f2a90c1aaaa; continue with:")
    with StubServer(["Final Answer: wiped the scratch"]).run_in_thread() as stub:
        resumed = invoke("resume", "3f2a9", "--base-url", stub.base_url, "--model", "m",
                         "--mode", "react", "--tools", str(tools), *where)
    assert resumed.exit_code == 0, resumed.output
    assert (f'Approved: wipe {{"target": "/tmp/スクラッチ"}} ({call_id}); it runs now, with a '
            "person's edited arguments") in resumed.stdout
    (saved,) = json.loads(invoke("show", "3f2a9", "--json", *where).stdout)["steps"][0]["calls"]
    assert saved["call"]["arguments"] == {"target": "disk"}
    assert saved["edited_arguments"] == {"target": "/tmp/スクラッチ"}
    note, output = saved["observation"]["output"].split("\n")
    assert "changed arguments" in note and output == "wiped /tmp/スクラッチ"
    shown = invoke("show", "3f2a9", *where).stdout
    assert 'Edited by a person to {"target": "/tmp/スクラッチ"}' in shown


def test_fork_makes_a_session_of_the_first_steps_and_says_how_it_goes_on(
        tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    where = ("--store", str(store))
    call_id = waiting(store, "5a5a01eeee")
    forked = invoke("fork", "5a5a", "--at", "1", *where)
    assert forked.exit_code == 0, forked.output
    first, command = forked.stdout.splitlines()
    child = first.split("new session ")[1].split(" ")[0]
    assert first == (f"forked session 5a5a01eeee at step 1: new session {child} "
                     "(awaiting_approval); decide on its waiting calls with:")
    assert command.split()[:4] == ["miniagent", "sessions", "approve", child]
    approved = invoke("approve", child, *where)
    assert f"approved {call_id} in session {child}" in approved.stdout
    parent = SQLiteStore(store).load("5a5a01eeee")
    assert (parent.status, parent.steps[0].calls[0].state) == (
        "awaiting_approval", "awaiting_approval")

    as_json = json.loads(invoke("fork", "5a5a01eeee", "--at", "0", "--json", *where).stdout)
    assert (as_json["status"], as_json["forked_from"]) == (
        "running", {"session_id": "5a5a01eeee", "step": 0})
    assert "sessions resume" in invoke("fork", "5a5a", "--at", "0", *where).stdout
    finished(store, "6b6b02ffff")
    asks = invoke("fork", "6b6b", "--at", "1", *where).stdout
    assert "(completed); ask it a next question with:\n  miniagent run --continue" in asks


@pytest.mark.parametrize(("args", "message"), [
    (["5a5a", "--at", "2"], "session 5a5a01eeee has 1 step(s): fork it at a step from 0 to 1, "
                            "not 2"),
    (["nope0000", "--at", "0"], "no session 'nope0000'"),
])
def test_a_bad_fork_is_one_line_and_saves_nothing(tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    store = tmp_path / "s.db"
    waiting(store, "5a5a01eeee")
    line = one_line(invoke("fork", *args, "--store", str(store)), 2 if "step" in message else 1)
    assert message in line
    assert [s.session_id for s in SQLiteStore(store).list()] == ["5a5a01eeee"]

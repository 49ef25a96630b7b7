"""`miniagent run --max-tools K`: a real subprocess against the stub server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import miniagent
from miniagent import Aids
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.testing.stub_server import StubServer


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``miniagent ARGS`` as a subprocess running this checkout, without endpoint settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(miniagent.__file__).parents[1]), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "miniagent", *args], capture_output=True,
                          text=True, env={**env, "COLUMNS": "120"}, timeout=60, cwd=cwd,
                          stdin=subprocess.DEVNULL)

TOOLS = '''
from miniagent import tool

@tool
def weather(city: str) -> str:
    """Current weather and forecast of a city."""
    return f"{city}: 18 C"

@tool
def share_price(company: str) -> str:
    """Latest share price of a listed company."""
    return "12"

@tool
def train_tickets(origin: str, destination: str) -> str:
    """查询火车票：两个城市之间的车次和余票。"""
    return "G1 有票"

@tool
def recipe(dish: str) -> str:
    """Cooking recipe for a dish."""
    return "boil"
'''


def test_run_offers_only_k_tools_and_records_the_choice(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    store = tmp_path / "s.db"
    script = [{"content": None, "tool_calls": [
        {"name": "train_tickets", "arguments": {"origin": "上海", "destination": "北京"}}]},
        "有票：G1"]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "明天上海到北京的火车票还有吗？", "--tools", "tools.py",
                  "--mode", "native", "--max-tools", "2", "--json", "--base-url",
                  stub.base_url, "--model", "m", "--store", str(store), cwd=tmp_path)
        sent = [[t["function"]["name"] for t in r["tools"]] for r in stub.requests]
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["status"], result["final_answer"]) == ("completed", "有票：G1")
    assert len(sent[0]) == 2 and "train_tickets" in sent[0]
    session = SQLiteStore(store).load(result["session_id"])
    assert [s.offered_tools for s in session.steps] == sent
    assert session.metadata["cli"]["max_tools"] == 2  # a resume offers the same way


def test_max_tools_must_be_positive(tmp_path: Path) -> None:
    out = cli("run", "q", "--max-tools", "0", "--base-url", "http://127.0.0.1:9/v1",
              cwd=tmp_path)
    assert out.returncode == 2 and "max-tools" in out.stderr


def test_sessions_show_prints_the_offer_and_a_sub_run(tmp_path: Path) -> None:
    from miniagent import Agent, ScriptedModel

    store = tmp_path / "s.db"
    helper = Agent(model=ScriptedModel(["Final Answer: 4"]))
    tools = [helper.as_tool(name="math_helper", description="Does arithmetic."),
             helper.as_tool(name="poet", description="Writes poems.")]
    boss = Agent(model=ScriptedModel(['Action: math_helper\nAction Input: {"question": "2+2"}',
                                      "Final Answer: 4"]),
                 tools=tools, aids=Aids(tool_selection=1), store=SQLiteStore(store))
    session_id = boss.run("What is 2+2 in arithmetic?").session_id
    out = cli("sessions", "show", session_id, "--store", str(store), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "offered: math_helper" in out.stdout
    assert f"sub-run {session_id}-" in out.stdout and ": completed, 1 step," in out.stdout

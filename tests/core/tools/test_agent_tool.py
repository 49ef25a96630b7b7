"""Agents as tools: the sub-run's record, usage, approvals relayed across a durable store, depth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import miniagent
from miniagent import Agent, Limits, OpenAICompatibleModel, ScriptedModel, SQLiteStore, tool
from miniagent.core.errors import UserError
from miniagent.core.session import AgentSession
from miniagent.core.tools.tool import Tool
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import StubServer


def body(text: str, prompt: int, completion: int) -> dict[str, Any]:
    """A whole chat completion with usage, as a server sends it."""
    return {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


def act(name: str, args: dict[str, Any]) -> str:
    return f"Thought: delegate\nAction: {name}\nAction Input: {json.dumps(args)}"


def last_observation(request: ModelRequest) -> str:
    return str(request.messages[-1]["content"]).removeprefix("Observation: ")


def test_a_sub_agent_answers_and_its_run_is_recorded_under_the_parent_step() -> None:
    @tool
    def population(city: str) -> int:
        """Population of a city."""
        return {"Paris": 2_100_000}[city]

    helper = Agent(model=ScriptedModel([
        body(act("population", {"city": "Paris"}), 50, 10),
        lambda r: body(f"Final Answer: {last_observation(r)} people", 70, 5),
    ]), tools=[population])
    boss_model = ScriptedModel([
        body(act("researcher", {"question": "How many people live in Paris?"}), 100, 20),
        lambda r: body(f"Final Answer: {last_observation(r)}", 130, 8),
    ])
    boss = Agent(model=boss_model, tools=[
        helper.as_tool(name="researcher", description="Finds facts about cities.")])
    result = boss.run("How big is Paris?", metadata={"cli": {"tools": ["boss.py"]}})

    assert (result.status, result.final_answer) == ("completed", "2100000 people")
    record = result.steps[0].calls[0]
    assert record.state == "completed" and record.observation is not None
    sub = record.observation.sub_run
    assert sub is not None
    assert (sub.agent, sub.status, sub.depth, sub.final_answer) == (
        "researcher", "completed", 1, "2100000 people")
    assert [s.index for s in sub.steps] == [1, 2]
    assert sub.steps[0].calls[0].observation.output == "2100000"  # type: ignore[union-attr]
    assert (sub.usage.prompt_tokens, sub.usage.completion_tokens) == (120, 15)
    # the parent's totals: its own two model calls plus the sub-run's
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (230 + 120, 28 + 15)
    saved = helper.session(sub.session_id)
    assert set(saved.metadata) == {"agent_depth", "parent_session"}  # not the parent's options
    assert saved.metadata["agent_depth"] == 1
    assert saved.metadata["parent_session"]["session_id"] == result.session_id
    assert sub.session_id == f"{result.session_id}-{record.call.id}"


@tool
def ponder(topic: str) -> str:
    """Think about a topic."""
    return f"thought about {topic}"


def test_a_sub_run_that_fails_is_an_error_observation_the_parent_can_use() -> None:
    # one step, then the last request at the limit finds no reply left: no answer
    helper = Agent(model=ScriptedModel([act("ponder", {"topic": "q"})]), tools=[ponder],
                   limits=Limits(max_steps=1))
    boss = Agent(model=ScriptedModel([
        act("helper", {"question": "q"}),
        lambda r: f"Final Answer: {last_observation(r)[:60]}",
    ]), tools=[helper.as_tool(name="helper", description="Helps.")])
    result = boss.run("q")
    observation = result.steps[0].observations[0]
    assert observation.is_error and observation.sub_run is not None
    assert observation.sub_run.status == "max_steps"
    assert "stopped without an answer (max_steps" in observation.output
    assert result.status == "completed"


def test_a_sub_run_that_answers_at_its_limit_gives_the_parent_that_answer() -> None:
    helper = Agent(model=ScriptedModel([act("ponder", {"topic": "q"}), "Final Answer: maybe 4"]),
                   tools=[ponder], limits=Limits(max_steps=1))
    boss = Agent(model=ScriptedModel([
        act("helper", {"question": "q"}), lambda r: f"Final Answer: {last_observation(r)}",
    ]), tools=[helper.as_tool(name="helper", description="Helps.")])
    result = boss.run("q")
    observation = result.steps[0].observations[0]
    assert not observation.is_error and observation.sub_run is not None
    assert (observation.sub_run.status, observation.sub_run.final_answer) == ("max_steps",
                                                                             "maybe 4")
    assert result.final_answer == ("The agent 'helper' reached its step limit; its best answer "
                                   "from what it had: maybe 4")


def deleter(folder: Path) -> Tool:
    @tool(requires_approval=True)
    def delete_file(name: str) -> str:
        """Delete a file of the workspace."""
        (folder / name).unlink()  # a second run would raise: it must run at most once
        return f"deleted {name}"

    return delete_file


def janitor_model(*outputs: Any) -> ScriptedModel:
    return ScriptedModel(list(outputs))


def agents(db: Path, folder: Path, sub_script: list[Any], boss_script: list[Any]
           ) -> tuple[Agent, Agent]:
    """Fresh agents over the same SQLite file, as a new process would build them."""
    janitor = Agent(model=ScriptedModel(sub_script), tools=[deleter(folder)],
                    store=SQLiteStore(db))
    boss = Agent(model=ScriptedModel(boss_script), store=SQLiteStore(db),
                 tools=[janitor.as_tool(name="janitor", description="Cleans the workspace.")])
    return janitor, boss


def start_waiting(tmp_path: Path) -> tuple[Path, Path, str]:
    db, folder = tmp_path / "sessions.db", tmp_path / "ws"
    folder.mkdir()
    (folder / "old.log").write_text("x", encoding="utf-8")
    _, boss = agents(db, folder,
                     [body(act("delete_file", {"name": "old.log"}), 40, 6)],
                     [body(act("janitor", {"question": "Remove old.log"}), 90, 12)])
    result = boss.run("Clean up old.log")
    assert result.status == "awaiting_approval"
    return db, folder, result.session_id


def test_a_sub_agents_approval_surfaces_in_the_parent_and_resumes_it_across_processes(
        tmp_path: Path) -> None:
    db, folder, parent_id = start_waiting(tmp_path)
    parent = SQLiteStore(db).load(parent_id)
    assert (parent.status, parent.phase) == ("awaiting_approval", "tools")
    [pending] = parent.pending_approvals()
    assert pending.tool == "janitor" and pending.arguments == {"question": "Remove old.log"}
    assert 'delete_file {"name": "old.log"}' in pending.reason
    sub = parent.steps[0].calls[0].observation.sub_run  # type: ignore[union-attr]
    assert sub is not None and sub.status == "awaiting_approval"
    assert [p.tool for p in sub.pending] == ["delete_file"]
    assert SQLiteStore(db).load(sub.session_id).status == "awaiting_approval"
    assert (folder / "old.log").exists()
    assert parent.usage.prompt_tokens == 90 + 40  # the sub-run's first call counts already

    janitor, boss = agents(  # "another process": new objects, the same file
        db, folder,
        [lambda r: body(f"Final Answer: {last_observation(r)}", 60, 4)],
        [lambda r: body(f"Final Answer: janitor says {last_observation(r)}", 150, 9)])
    boss.approve(parent_id, reason="it is only a log")
    result = boss.resume(parent_id)

    assert (result.status, result.final_answer) == ("completed", "janitor says deleted old.log")
    assert not (folder / "old.log").exists()
    record = result.steps[0].calls[0]
    assert record.observation is not None and record.observation.sub_run is not None
    done = record.observation.sub_run
    assert (done.status, done.final_answer) == ("completed", "deleted old.log")
    sub_session = janitor.session(done.session_id)
    assert sub_session.status == "completed"
    moves = [m.target for m in sub_session.steps[0].calls[0].moves]
    assert moves == ["awaiting_approval", "approved", "started", "completed"]
    assert sub_session.steps[0].calls[0].note == "it is only a log"
    # each token counted once: the parent's 2 calls and the sub-run's 2 calls
    assert result.usage.prompt_tokens == 90 + 150 + 40 + 60
    assert result.usage.completion_tokens == 12 + 9 + 6 + 4
    assert SQLiteStore(db).load(parent_id).usage == result.usage


def test_a_denial_reaches_the_sub_agent_which_works_around_it(tmp_path: Path) -> None:
    db, folder, parent_id = start_waiting(tmp_path)

    def sub_answer(request: ModelRequest) -> str:
        seen = last_observation(request)
        assert "A person denied this call of 'delete_file'" in seen and "keep it" in seen
        return "Final Answer: I was not allowed to delete old.log"

    janitor, boss = agents(db, folder, [sub_answer],
                           [lambda r: f"Final Answer: {last_observation(r)}"])
    boss.deny(parent_id, reason="keep it")
    result = boss.resume(parent_id)
    assert (result.status, result.final_answer) == (
        "completed", "I was not allowed to delete old.log")
    assert (folder / "old.log").exists()
    sub_id = result.steps[0].calls[0].observation.sub_run.session_id  # type: ignore[union-attr]
    sub_call = janitor.session(sub_id).steps[0].calls[0]
    assert [m.target for m in sub_call.moves] == ["awaiting_approval", "denied", "completed"]
    parent_moves = [m.target for m in result.steps[0].calls[0].moves]
    assert parent_moves == ["started", "awaiting_approval", "approved", "started", "completed"]
    assert "denied for the agent 'janitor'" in result.steps[0].calls[0].moves[2].reason


def test_a_sub_session_lost_from_a_memory_store_is_a_clear_error(tmp_path: Path) -> None:
    db, folder = tmp_path / "s.db", tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("x", encoding="utf-8")
    janitor = Agent(model=ScriptedModel([act("delete_file", {"name": "a.txt"})]),
                    tools=[deleter(folder)])  # a InMemoryStore: gone with this object
    boss = Agent(model=ScriptedModel([act("janitor", {"question": "rm a.txt"})]),
                 store=SQLiteStore(db),
                 tools=[janitor.as_tool(name="janitor", description="Cleans.")])
    parent_id = boss.run("rm a.txt").session_id
    other = Agent(model=ScriptedModel([]), tools=[deleter(folder)])
    boss2 = Agent(model=ScriptedModel([lambda r: f"Final Answer: {last_observation(r)}"]),
                  store=SQLiteStore(db),
                  tools=[other.as_tool(name="janitor", description="Cleans.")])
    boss2.approve(parent_id)
    result = boss2.resume(parent_id)
    assert result.status == "completed" and (folder / "a.txt").exists()
    assert "is gone from its store" in (result.final_answer or "")
    assert result.steps[0].observations[0].is_error


def test_depth_is_limited_with_an_error_observation() -> None:
    leaf_model = ScriptedModel(["Final Answer: leaf"])
    leaf = Agent(model=leaf_model)
    mid = Agent(model=ScriptedModel([
        act("leaf", {"question": "q"}),
        lambda r: f"Final Answer: mid saw: {last_observation(r)}",
    ]), tools=[leaf.as_tool(name="leaf", description="Leaf.", max_depth=1)])
    top = Agent(model=ScriptedModel([
        act("mid", {"question": "q"}),
        lambda r: f"Final Answer: {last_observation(r)}",
    ]), tools=[mid.as_tool(name="mid", description="Mid.")])
    result = top.run("q")
    assert result.status == "completed"
    assert "may nest at most 1 deep, and this call would run at depth 2" in (
        result.final_answer or "")
    mid_run = result.steps[0].observations[0].sub_run
    assert mid_run is not None and mid_run.depth == 1
    assert mid_run.steps[0].observations[0].is_error
    assert mid_run.steps[0].observations[0].sub_run is None
    assert leaf_model.requests == []  # the leaf never ran


def test_an_agent_that_lists_itself_stops_at_the_default_depth() -> None:
    replies: list[Any] = [act("myself", {"question": "again"})] * 4 + [
        lambda r: f"Final Answer: {last_observation(r)[:80]}"] * 4
    model = ScriptedModel(replies)
    agent = Agent(model=model)
    agent.sources.append(agent.as_tool(name="myself", description="Me."))
    result = agent.run("q")
    assert result.status == "completed" and len(model.requests) == 8
    run, depth = result.steps[0].observations[0].sub_run, 1
    while run is not None and run.steps[0].observations[0].sub_run is not None:
        run, depth = run.steps[0].observations[0].sub_run, depth + 1
    assert depth == 3 and run is not None
    assert "may nest at most 3 deep" in run.steps[0].observations[0].output


def test_as_tool_checks_its_options() -> None:
    agent = Agent(model=ScriptedModel([]))
    with pytest.raises(UserError, match="max_depth must be at least 1"):
        agent.as_tool(name="x", description="d", max_depth=0)
    with pytest.raises(UserError, match="Invalid tool name"):
        agent.as_tool(name="not a name", description="d")


def test_sub_runs_and_old_sessions_load_from_saved_json(tmp_path: Path) -> None:
    helper = Agent(model=ScriptedModel(["Final Answer: 4"]))
    boss = Agent(model=ScriptedModel([act("calc", {"question": "2+2"}), "Final Answer: 4"]),
                 tools=[helper.as_tool(name="calc", description="Math.")],
                 store=SQLiteStore(tmp_path / "s.db"))
    result = boss.run("2+2?")
    loaded = SQLiteStore(tmp_path / "s.db").load(result.session_id)
    assert loaded.steps == result.steps
    data = loaded.to_dict()
    for step in data["steps"]:  # as an older miniagent wrote it: without the new fields
        del step["offered_tools"]
        for call in step["calls"]:
            del call["observation"]["sub_run"]
    old = AgentSession.from_dict(json.loads(json.dumps(data)))
    assert old.steps[0].offered_tools is None
    assert old.steps[0].observations[0].sub_run is None
    assert old.steps[0].observations[0].output == "4"


def test_parent_and_sub_agent_over_a_real_http_server() -> None:
    def answer(request: dict[str, Any], n: int) -> Any:
        first = request["messages"][1]["content"]
        if first == "Who wrote Hamlet? Answer briefly.":  # the sub-agent's question
            return "Thought: I know\nFinal Answer: Shakespeare"
        if request["messages"][-1]["role"] == "user" and n == 0:
            return act("scholar", {"question": "Who wrote Hamlet? Answer briefly."})
        return "Thought: done\nFinal Answer: " + request["messages"][-1]["content"].removeprefix(
            "Observation: ")

    with StubServer(answer).run_in_thread() as stub:
        def model() -> OpenAICompatibleModel:
            return OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="react")
        scholar = Agent(model=model())
        boss = Agent(model=model(), tools=[
            scholar.as_tool(name="scholar", description="Knows literature.")])
        result = boss.run("Hamlet's author?")
        received = [r["messages"][1]["content"] for r in stub.requests]
    assert (result.status, result.final_answer) == ("completed", "Shakespeare")
    assert received == ["Hamlet's author?", "Who wrote Hamlet? Answer briefly.",
                        "Hamlet's author?"]
    assert "scholar" in stub.requests[0]["messages"][0]["content"]  # offered to the parent


PROCESS_SCRIPT = '''
import json, sys
from pathlib import Path
from miniagent import Agent, ScriptedModel, SQLiteStore, tool

db, folder, phase = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

@tool(requires_approval=True)
def delete_file(name: str) -> str:
    """Delete a file of the workspace."""
    (folder / name).unlink()
    return f"deleted {name}"

def act(name, args):
    return f"Action: {name}\\nAction Input: {json.dumps(args)}"

def echo(request):
    return "Final Answer: " + request.messages[-1]["content"].removeprefix("Observation: ")

if phase == "start":
    sub, top = [act("delete_file", {"name": "old.log"})], [act("janitor", {"question": "rm"})]
else:
    sub, top = [echo], [echo]
janitor = Agent(model=ScriptedModel(sub), tools=[delete_file], store=SQLiteStore(db))
boss = Agent(model=ScriptedModel(top), store=SQLiteStore(db),
             tools=[janitor.as_tool(name="janitor", description="Cleans up.")])
if phase == "start":
    result = boss.run("Clean up")
else:
    boss.approve(phase)
    result = boss.resume(phase)
print(json.dumps({"id": result.session_id, "status": result.status,
                  "answer": result.final_answer}))
'''


def test_the_relay_works_across_real_processes(tmp_path: Path) -> None:
    script, db, folder = tmp_path / "boss.py", tmp_path / "s.db", tmp_path / "ws"
    script.write_text(PROCESS_SCRIPT, encoding="utf-8")
    folder.mkdir()
    (folder / "old.log").write_text("x", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(miniagent.__file__).parents[1])}

    def run(phase: str) -> dict[str, Any]:
        out = subprocess.run([sys.executable, str(script), str(db), str(folder), phase],
                             capture_output=True, text=True, timeout=60, env=env,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr
        answer: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
        return answer

    first = run("start")
    assert first["status"] == "awaiting_approval" and (folder / "old.log").exists()
    second = run(first["id"])
    assert (second["status"], second["answer"]) == ("completed", "deleted old.log")
    assert not (folder / "old.log").exists()


def test_sub_runs_draw_on_the_parents_budget_and_steps() -> None:
    """An agent listing itself as a tool, fanning out 8 calls per reply: the whole tree stays
    within the parent's token budget (give or take the calls already under way) and its steps,
    instead of multiplying them level by level."""
    from itertools import count

    from miniagent.core.types import ModelResponse, TokenUsage, ToolCall

    numbers = count()

    def fan_out(request: Any) -> ModelResponse:
        calls = [ToolCall(id=f"c{i}", name="myself",
                          arguments={"question": f"part {next(numbers)}"}) for i in range(8)]
        return ModelResponse(tool_calls=calls,
                             usage=TokenUsage(prompt_tokens=40, completion_tokens=10))

    model = ScriptedModel([fan_out] * 10_000, tool_mode="native")
    agent = Agent(model=model, limits=Limits(max_steps=10, token_budget=500))
    agent.sources.append(agent.as_tool(name="myself", description="Me.", max_depth=3))
    result = agent.run("loop")
    calls = len(model.requests)
    assert result.status in ("budget_exceeded", "max_steps")
    assert calls <= 40, calls  # was 1,097 model calls for a budget of 500
    assert result.usage.total_tokens <= 500 + 8 * 50 * 3, result.usage

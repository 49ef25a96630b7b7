"""MCP servers' lifecycle and failure handling, with real server processes.

The lab server (``mcp_lab_server.py``, official SDK) dies, sleeps, counts and grows on
request; mcp-server-time (PyPI) is the server nobody here wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import LAB_SERVER, TIME_ARGS, descendants, no_orphans, wait_gone

from miniagent import Agent, RetryPolicy, ScriptedModel
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.core.tools.toolbox import Toolbox
from miniagent.core.types import Observation, ToolCall, reporting_waits
from miniagent.mcp import MCPServer, ToolRule

__all__ = ["no_orphans"]  # fixture


def lab(**options: object) -> MCPServer:
    return MCPServer.stdio(sys.executable, args=[str(LAB_SERVER)], errlog=subprocess.DEVNULL,
                           **options)  # type: ignore[arg-type]


def time_server(**options: object) -> MCPServer:
    return MCPServer.stdio(sys.executable, args=TIME_ARGS, errlog=subprocess.DEVNULL,
                           **options)  # type: ignore[arg-type]


def react(tool: str, arguments: dict[str, object]) -> str:
    return f"Thought: use {tool}\nAction: {tool}\nAction Input: {json.dumps(arguments)}"


async def call(server: MCPServer, name: str, **arguments: object) -> tuple[str, bool]:
    observation = await server.call_tool(ToolCall(id="c", name=name, arguments=arguments))
    return observation.output, observation.is_error


# -- mcp-server-time ----------------------------------------------------------------------

@pytest.mark.usefixtures("no_orphans")
async def test_time_server_answers_for_tokyo() -> None:
    model = ScriptedModel([react("get_current_time", {"timezone": "Asia/Tokyo"}),
                           "Thought: known\nFinal Answer: It is evening in Tokyo."])
    agent = Agent(model=model, tools=[time_server()])
    try:
        result = await agent.arun("What time is it in Tokyo?")
    finally:
        await agent.aclose()
    assert result.status == "completed"
    observation = result.steps[0].observations[0]
    assert not observation.is_error
    answer = json.loads(observation.output)
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")


@pytest.mark.usefixtures("no_orphans")
async def test_time_server_invalid_timezone_is_an_error_observation() -> None:
    model = ScriptedModel([react("get_current_time", {"timezone": "Mars/Olympus_Mons"}),
                           react("get_current_time", {"timezone": "Europe/Paris"}),
                           "Thought: fixed\nFinal Answer: done"])
    agent = Agent(model=model, tools=[time_server()])
    try:
        result = await agent.arun("Time on Mars?")
    finally:
        await agent.aclose()
    first, second = (step.observations[0] for step in result.steps[:2])
    assert first.is_error and "Mars/Olympus_Mons" in first.output
    assert "returned an error" in first.output
    assert not second.is_error and json.loads(second.output)["timezone"] == "Europe/Paris"
    assert result.status == "completed"


# -- names, filters, rules ----------------------------------------------------------------

async def test_prefix_and_filters() -> None:
    server = time_server(prefix="clock", deny=["convert_*"])
    try:
        tools = await server.list_tools()
        assert [t.name for t in tools] == ["clock_get_current_time"]
        output, is_error = await call(server, "clock_get_current_time", timezone="Etc/UTC")
        assert not is_error and json.loads(output)["timezone"] == "Etc/UTC"
        assert (await call(server, "convert_time"))[1]  # filtered out: unknown here
    finally:
        await server.aclose()
    allowed = time_server(allow=["convert_time"])
    try:
        assert [t.name for t in await allowed.list_tools()] == ["convert_time"]
    finally:
        await allowed.aclose()


async def test_rules_set_approval_idempotency_and_timeout_per_tool() -> None:
    server = lab(rules={"count": ToolRule(requires_approval=True, timeout=3),
                        "s*": ToolRule(idempotent=True)})
    try:
        tools = {t.name: t for t in await server.list_tools()}
    finally:
        await server.aclose()
    assert tools["count"].needs_approval({}) and not tools["pid"].needs_approval({})
    assert tools["sleep"].idempotent and not tools["count"].idempotent
    assert tools["count"].timeout is not None and tools["count"].timeout < tools["pid"].timeout


@pytest.mark.usefixtures("no_orphans")
async def test_a_rule_limits_an_mcp_tool_to_one_call_at_once() -> None:
    server = lab(rules={"sleep": ToolRule(max_concurrency=1)})
    waits: list[tuple[str, str]] = []
    try:
        box = await Toolbox.gather([server])
        assert box.get("sleep").max_concurrency == 1  # type: ignore[union-attr]
        with reporting_waits(lambda what, why: waits.append((what, why))):
            observations = await asyncio.gather(*(
                box.execute(ToolCall(id=f"c{i}", name="sleep", arguments={"seconds": 0.05}))
                for i in range(3)))
    finally:
        await server.aclose()
    assert [o.output for o in observations] == ["slept 0.05"] * 3
    assert waits == [("tool sleep", "1 call at once (max_concurrency)")] * 2


# -- failures -----------------------------------------------------------------------------

@pytest.mark.usefixtures("no_orphans")
async def test_a_dead_server_is_started_again_on_the_next_call() -> None:
    server = lab()
    try:
        await server.list_tools()
        first_pid = int((await call(server, "pid"))[0])
        output, is_error = await call(server, "die")
        assert is_error and "closed the connection" in output and "started again" in output
        assert not wait_gone({first_pid})
        output, is_error = await call(server, "pid")
        assert not is_error
        assert int(output) != first_pid
    finally:
        await server.aclose()


@pytest.mark.usefixtures("no_orphans")
async def test_an_idempotent_call_meeting_a_dead_server_is_sent_again_under_its_policy() -> None:
    async def after_a_kill(server: MCPServer) -> tuple[Observation, int]:
        toolbox = await Toolbox.gather([server])
        first_pid = int((await call(server, "pid"))[0])
        os.kill(first_pid, signal.SIGKILL)
        assert not wait_gone({first_pid})
        return await toolbox.execute(ToolCall(id="c", name="pid", arguments={})), first_pid

    policy = RetryPolicy(max_attempts=2, initial_delay=0.01)
    server = lab(rules={"pid": ToolRule(retry=policy)})
    try:
        observation, _ = await after_a_kill(server)
    finally:
        await server.aclose()
    # pid is not annotated idempotent: the call fails once, the server restarts on the next
    assert observation.is_error and "started again" in observation.output
    assert observation.attempts == 1
    server = lab(rules={"pid": ToolRule(idempotent=True, retry=policy)})
    try:
        observation, first_pid = await after_a_kill(server)
    finally:
        await server.aclose()
    assert not observation.is_error and int(observation.output) != first_pid
    assert observation.attempts == 2


@pytest.mark.usefixtures("no_orphans")
async def test_an_idempotent_call_is_sent_as_often_as_the_record_says(tmp_path: Path) -> None:
    """tool_retry=3 bounds what the server receives: one layer of retries, not two."""
    ledger = tmp_path / "received.txt"
    model = ScriptedModel([react("die_counted", {"ledger": str(ledger)}),
                           "Thought: it failed\nFinal Answer: gave up"])
    agent = Agent(model=model, tools=[lab(rules={"die_counted": ToolRule(idempotent=True)})],
                  tool_retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    try:
        result = await agent.arun("crash it")
    finally:
        await agent.aclose()
    observation = result.steps[0].calls[0].observation
    assert observation is not None and observation.is_error
    assert observation.attempts == 3
    assert len(ledger.read_text(encoding="utf-8").splitlines()) == 3


@pytest.mark.usefixtures("no_orphans")
async def test_server_errors_and_call_timeouts_are_error_observations() -> None:
    server = lab(rules={"sleep": ToolRule(timeout=0.5)})
    try:
        await server.list_tools()
        output, is_error = await call(server, "fail", message="boom")
        assert is_error and "returned an error" in output
        output, is_error = await call(server, "sleep", seconds=30)
        assert is_error and "did not answer within 0.5 s (call timeout)" in output
        assert await call(server, "sleep", seconds=0) == ("slept 0.0", False)
    finally:
        await server.aclose()


@pytest.mark.usefixtures("no_orphans")
async def test_a_server_that_never_answers_hits_the_connect_timeout() -> None:
    silent = MCPServer.stdio(sys.executable, args=["-c", "import time; time.sleep(60)"],
                             connect_timeout=1, errlog=subprocess.DEVNULL)
    model = ScriptedModel(["Thought: no tools needed\nFinal Answer: ok"])
    agent = Agent(model=model, tools=[silent])
    try:
        with pytest.raises(Exception, match="cannot list the tools of MCP server"):
            await agent.arun("hi")
        output, is_error = await call(silent, "anything")
        assert is_error and "Unknown tool" in output
        silent._server_names["x"] = "x"  # a listed tool, as if the server had answered before
        output, is_error = await call(silent, "x")
        assert is_error and "did not start within 1 s (connect timeout)" in output
    finally:
        await agent.aclose()


# -- lifecycle ----------------------------------------------------------------------------

def test_no_server_process_outlives_a_failed_run() -> None:
    before = descendants()
    model = ScriptedModel([react("pid", {})])  # then runs out of replies: the run errors
    result = Agent(model=model, tools=[lab()]).run("pid?")
    assert result.status == "error"
    assert result.steps[0].observations[0].is_error is False
    assert not wait_gone(descendants() - before)


async def test_no_server_process_outlives_a_cancelled_run() -> None:
    before = descendants()
    model = ScriptedModel([react("sleep", {"seconds": 60})])
    agent = Agent(model=model, tools=[lab()])
    task = asyncio.create_task(agent.arun("sleep"))
    for _ in range(400):  # until the server runs the call (bounded: 20 s)
        await asyncio.sleep(0.05)
        if descendants() - before:
            break
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await agent.aclose()
    assert not wait_gone(descendants() - before)


def test_no_server_process_outlives_an_event_loop_left_without_closing() -> None:
    before = descendants()

    async def forget() -> None:
        server = lab()
        await server.list_tools()  # started, never closed: asyncio.run's end must stop it

    asyncio.run(forget())
    assert not wait_gone(descendants() - before)


# -- list changes -------------------------------------------------------------------------

@pytest.mark.usefixtures("no_orphans")
async def test_tool_list_is_cached_and_refreshed_when_the_server_says_it_changed() -> None:
    server = lab()
    agent = Agent(model=ScriptedModel([
        react("add_greeter", {}), "Thought: ok\nFinal Answer: added",
        react("greet", {"name": "Ada"}), "Thought: ok\nFinal Answer: greeted"]),
        tools=[server])
    try:
        first = await agent.arun("add a greeter")
        assert first.final_answer == "added"
        for _ in range(100):  # the change event arrives on its own (bounded: 5 s)
            if "greet" in {t.name for t in await server.list_tools()}:
                break
            await asyncio.sleep(0.05)
        second = await agent.arun("greet Ada")
    finally:
        await agent.aclose()
    assert second.steps[0].observations[0].output == "Hello, Ada!"
    assert second.final_answer == "greeted"


# -- durable sessions ---------------------------------------------------------------------

@pytest.mark.usefixtures("no_orphans")
async def test_a_session_waiting_for_approval_resumes_with_a_new_server(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "sessions.db")
    rules = {"count": ToolRule(requires_approval=True)}
    first = Agent(model=ScriptedModel([react("count", {})]), tools=[lab(rules=rules)],
                  store=store)
    try:
        waiting = await first.arun("count once")
    finally:
        await first.aclose()
    assert waiting.status == "awaiting_approval"
    # another agent (as in another process), another server process, the same store
    second = Agent(model=ScriptedModel(["Thought: counted\nFinal Answer: 1"]),
                   tools=[lab(rules=rules)], store=SQLiteStore(tmp_path / "sessions.db"))
    try:
        second.approve(waiting.session_id)
        done = await second.aresume(waiting.session_id)
    finally:
        await second.aclose()
    assert done.status == "completed"
    record = done.steps[0].calls[0]
    assert record.observation is not None and record.observation.output == "1"
    # the session recorded the server (secrets aside), enough to rebuild it elsewhere
    recorded = second.session(waiting.session_id).metadata["tool_sources"]
    assert recorded == [lab().record()]
    rebuilt = MCPServer.from_record(recorded[0], rules=rules)
    assert rebuilt.config == lab().config


@pytest.mark.usefixtures("no_orphans")
async def test_the_idempotency_key_reaches_the_server() -> None:
    model = ScriptedModel([react("idempotency_key", {}), "Thought: ok\nFinal Answer: ok"])
    agent = Agent(model=model, tools=[lab()])
    try:
        result = await agent.arun("key?")
    finally:
        await agent.aclose()
    record = result.steps[0].calls[0]
    assert record.observation is not None
    key = record.observation.output
    assert key == f"{result.session_id}:{record.call.id}"


@pytest.mark.usefixtures("no_orphans")
async def test_concurrent_calls_meeting_a_dead_server_restart_it_once() -> None:
    server = lab(rules={"pid": ToolRule(idempotent=True,
                                        retry=RetryPolicy(max_attempts=2, initial_delay=0.01))})
    try:
        toolbox = await Toolbox.gather([server])
        first_pid = int((await call(server, "pid"))[0])
        os.kill(first_pid, signal.SIGKILL)
        assert not wait_gone({first_pid})
        results = await asyncio.gather(*(
            toolbox.execute(ToolCall(id=f"c{i}", name="pid", arguments={})) for i in range(4)))
    finally:
        await server.aclose()
    assert all(not result.is_error for result in results)
    pids = {int(result.output) for result in results}
    assert len(pids) == 1 and first_pid not in pids


@pytest.mark.usefixtures("no_orphans")
async def test_a_server_that_cannot_be_reached_is_tried_again_under_the_rules_policy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No call was sent, so even a tool that is not idempotent is tried again."""
    policy = RetryPolicy(max_attempts=3, initial_delay=0.01)
    server = lab(rules={"pid": ToolRule(retry=policy)})
    try:
        toolbox = await Toolbox.gather([server])
        assert toolbox.get("pid").retry == policy  # type: ignore[union-attr]
        reach, refused = server._client, []

        async def flaky_reach() -> object:
            if len(refused) < 2:
                refused.append(1)
                raise ConnectionRefusedError("refused")
            return await reach()

        monkeypatch.setattr(server, "_client", flaky_reach)
        observation = await toolbox.execute(ToolCall(id="c1", name="pid", arguments={}))
    finally:
        await server.aclose()
    assert not observation.is_error and int(observation.output) > 0
    assert observation.attempts == 3 and len(refused) == 2

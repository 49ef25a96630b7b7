"""MCP servers at warm-up: ``Agent.start()`` starts the server process and lists its tools, so
the first call finds it running (the same process answers); a server that cannot start is
reported, not raised. Real server processes (the lab server, mcp-server-time)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest
from mcp_support import LAB_SERVER, TIME_ARGS, descendants, no_orphans

from miniagent import Agent, ScriptedModel
from miniagent.core.tools.wrappers import Prefixed
from miniagent.mcp import MCPServer

__all__ = ["no_orphans"]  # fixture


@pytest.mark.usefixtures("no_orphans")
async def test_start_connects_the_server_before_the_first_call() -> None:
    server = MCPServer.stdio(sys.executable, args=[str(LAB_SERVER)], errlog=subprocess.DEVNULL)
    model = ScriptedModel(['Thought: ask\nAction: pid\nAction Input: {}',
                           "Thought: known\nFinal Answer: done"])
    before = descendants()
    agent = Agent(model=model, tools=[server])
    try:
        report = await agent.start()
        assert report.ok and report.warmed == [repr(server)]
        started = descendants() - before
        assert len(started) == 1  # the server runs before any call
        assert server._connection is not None and server._connection.alive
        result = await agent.arun("Which process are you?")
        assert result.status == "completed"
        assert int(result.steps[0].observations[0].output) in started  # no new connection
    finally:
        await agent.aclose()


@pytest.mark.usefixtures("no_orphans")
async def test_a_second_agent_sharing_the_server_does_not_start_it_again() -> None:
    server = Prefixed(MCPServer.stdio(sys.executable, args=TIME_ARGS,
                                      errlog=subprocess.DEVNULL), "time")
    first = Agent(model=ScriptedModel(["Final Answer: a"]), tools=[server])
    second = Agent(model=ScriptedModel(["Final Answer: b"]), tools=[server])
    try:
        before = descendants()
        reports = [await first.start(), await second.start()]
        assert [r.outcomes[0].status for r in reports] == ["warmed", "already_warm"]
        assert len(descendants() - before) == 1
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.usefixtures("no_orphans")
async def test_a_server_that_cannot_start_is_reported_not_raised() -> None:
    broken = MCPServer.stdio(sys.executable, args=["-c", "import sys; sys.exit(3)"],
                             name="broken", errlog=subprocess.DEVNULL, connect_timeout=10.0)
    agent = Agent(model=ScriptedModel(["Final Answer: fine without it"]), tools=[])
    agent.sources.append(broken)
    try:
        report = await agent.start(timeout=20.0)
        [failed] = report.failed
        assert failed.name == "MCPServer('broken')" and failed.status == "failed"
        assert "MCP server broken" in (failed.error or "")
    finally:
        await agent.aclose()


@pytest.mark.usefixtures("no_orphans")
async def test_a_server_that_died_after_its_warm_up_is_started_again_at_the_next_start() -> None:
    server = MCPServer.stdio(sys.executable, args=[str(LAB_SERVER)], errlog=subprocess.DEVNULL)
    model = ScriptedModel(['Thought: ask\nAction: pid\nAction Input: {}',
                           "Thought: known\nFinal Answer: done"])
    agent = Agent(model=model, tools=[server])
    before = descendants()
    try:
        assert (await agent.start()).warmed == [repr(server)]
        [dead] = descendants() - before
        os.kill(dead, signal.SIGKILL)
        for _ in range(200):  # until its end shows (its stderr closes), 10 s at most
            if server._connection is not None and server._connection.exited:
                break
            await asyncio.sleep(0.05)
        report = await agent.start()
        assert [o.status for o in report.outcomes] == ["warmed"]  # not "already_warm"
        [alive] = descendants() - before - {dead}
        result = await agent.arun("Which process are you?")
        assert result.steps[0].observations[0].output == str(alive)  # the first call is warm
    finally:
        await agent.aclose()


def test_a_server_never_started_is_cold_outside_an_event_loop() -> None:
    server = MCPServer.stdio(sys.executable, args=[str(LAB_SERVER)], errlog=subprocess.DEVNULL)
    assert server.is_warm() is False

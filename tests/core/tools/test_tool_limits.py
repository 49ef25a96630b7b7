"""A tool's ``max_concurrency``: a limit shared by every session, agent, loop and thread of the
process, enforced by the one executor (the toolbox)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from miniagent import (
    Agent,
    Limits,
    ScriptedModel,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolRule,
    WithRules,
    tool,
)
from miniagent.core.errors import ConfigError, ToolDefinitionError
from miniagent.core.runtime import events as ev
from miniagent.core.tools.toolbox import Toolbox
from miniagent.core.types import ModelRequest, ToolCall


def _step(request: ModelRequest) -> str:
    """Call the tool once, then answer with what it said."""
    last = str(request.messages[-1].get("content") or "")
    if "Observation:" in last:
        return "Thought: done\nFinal Answer: " + last.split("Observation:", 1)[1].strip()
    return 'Thought: fetch it\nAction: fetch\nAction Input: {"key": "k"}'


class Gauge:
    """Counts the calls running at once; the first ``n`` wait until ``n`` run together, so the
    largest number seen is ``n`` whenever the limit lets ``n`` in (and larger if it fails)."""

    def __init__(self, n: int) -> None:
        self.n, self.now, self.most, self.done = n, 0, 0, 0
        self.lock = threading.Lock()
        self.full = threading.Event()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            if self.now >= self.n:
                self.full.set()

    def leave(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1

    async def call(self) -> str:
        self.enter()
        try:
            for _ in range(1000):  # bounded: 10 s at most
                if self.full.is_set():
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0)
            return "ok"
        finally:
            self.leave()

    def call_sync(self) -> str:
        self.enter()
        try:
            self.full.wait(10)
            return "ok"
        finally:
            self.leave()


def _unique(prefix: str) -> str:
    """A tool name of its own: the slots are the process's, kept by name."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _fetch(name: str, gauge: Gauge, limit: int | None) -> Any:
    async def fetch(key: str) -> str:
        """Fetch a key."""
        return await gauge.call()

    return tool(name=name, max_concurrency=limit)(fetch)


def _model(name: str, sessions: int) -> ScriptedModel:
    def step(request: ModelRequest) -> str:
        return _step(request).replace("Action: fetch", f"Action: {name}")
    return ScriptedModel([step] * (2 * sessions))


async def test_50_sessions_never_run_more_than_n_calls_at_once() -> None:
    name, gauge = _unique("fetch"), Gauge(3)
    events: list[ev.Event] = []
    agent = Agent(model=_model(name, 50), tools=[_fetch(name, gauge, 3)])
    agent.subscribe(events.append)
    results = await asyncio.gather(*(agent.arun(f"question {i}") for i in range(50)))
    await agent.aclose()
    assert [r.status for r in results] == ["completed"] * 50
    assert {r.final_answer for r in results} == {"ok"}
    assert (gauge.most, gauge.done) == (3, 50)
    waits = [e for e in events if isinstance(e, ev.SlotWaiting)]
    assert waits and {(e.what, e.reason) for e in waits} == {
        (f"tool {name}", "3 calls at once (max_concurrency)")}
    started = {e.span_id: e.call.id for e in events if isinstance(e, ev.ToolStarted)}
    assert all(started[e.span_id] == e.call_id for e in waits)  # in the waiting call's span


async def test_without_a_limit_the_same_sessions_run_together() -> None:
    """The control: the gauge does see more than 3 at once when nothing limits them."""
    name, gauge = _unique("fetch"), Gauge(10)
    agent = Agent(model=_model(name, 10), tools=[_fetch(name, gauge, None)])
    results = await asyncio.gather(*(agent.arun(f"question {i}") for i in range(10)))
    assert [r.status for r in results] == ["completed"] * 10
    assert gauge.most == 10


async def test_a_tool_rule_limits_a_second_source_across_two_agents() -> None:
    name, gauge = _unique("fetch"), Gauge(2)
    source = WithRules(ToolRegistry([_fetch(name, gauge, None)]),
                       {"fetch_*": ToolRule(max_concurrency=2)})
    agents = [Agent(model=_model(name, 15), tools=[source]) for _ in range(2)]
    results = await asyncio.gather(*(a.arun(f"q{i}") for a in agents for i in range(15)))
    assert [r.status for r in results] == ["completed"] * 30
    assert (gauge.most, gauge.done) == (2, 30)


def test_the_limit_holds_across_threads_each_running_its_own_event_loop() -> None:
    """Sync ``Agent.run`` calls in threads: each runs a loop of its own, and the limit (2)
    still holds between them (an asyncio.Semaphore could not)."""
    name, gauge = _unique("lookup"), Gauge(2)

    def lookup(key: str) -> str:
        """Look a key up (sync: it runs on a worker thread)."""
        return gauge.call_sync()

    limited = tool(name=name, max_concurrency=2)(lookup)
    results: list[str] = []

    def one(i: int) -> None:
        agent = Agent(model=_model(name, 1), tools=[limited])
        results.append(agent.run(f"q{i}").status)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == ["completed"] * 8
    assert (gauge.most, gauge.done) == (2, 8)


async def test_a_call_still_queued_at_the_deadline_never_runs() -> None:
    name, ran = _unique("slow"), []
    release = asyncio.Event()

    async def slow(key: str) -> str:
        """Hold a slot until released."""
        ran.append(key)
        await release.wait()
        return key

    box = await Toolbox.gather([ToolRegistry([tool(name=name, max_concurrency=1)(slow)])])

    def context(call_id: str, deadline: float | None) -> ToolContext:
        return ToolContext.for_call("s", call_id, name, 1, deadline=deadline)

    first = asyncio.ensure_future(box.execute(
        ToolCall(id="c1", name=name, arguments={"key": "first"}), context("c1", None)))
    while not ran:
        await asyncio.sleep(0.01)
    queued = await box.execute(ToolCall(id="c2", name=name, arguments={"key": "second"}),
                               context("c2", time.time() + 0.2))
    assert queued.is_error and "deadline passed while the call waited for a slot" in \
        queued.output
    release.set()
    assert (await first).output == "first"
    after = await box.execute(ToolCall(id="c3", name=name, arguments={"key": "third"}),
                              context("c3", None))
    assert after.output == "third"
    assert ran == ["first", "third"]  # the queued call never ran, not even later


async def test_a_run_whose_deadline_passes_while_queued_ends_timeout_and_the_call_never_runs(
) -> None:
    name, ran = _unique("slow"), []
    release = threading.Event()

    def slow(key: str) -> str:
        """Hold a slot until released."""
        ran.append(key)
        release.wait(10)
        return key

    limited = tool(name=name, max_concurrency=1)(slow)
    holder = Agent(model=_model(name, 1), tools=[limited])
    queued = Agent(model=_model(name, 1), tools=[limited], limits=Limits(timeout=0.5))
    holding = asyncio.ensure_future(holder.arun("hold"))
    while not ran:
        await asyncio.sleep(0.01)
    result = await queued.arun("wait")
    release.set()
    assert (await holding).status == "completed"
    # the run's deadline and the queued call's give-up time are the same instant: either the
    # run ended first, or the model was told the call was not run (and answered with that)
    assert result.status == "timeout" or (
        result.status == "completed"
        and "deadline passed while the call waited for a slot" in (result.final_answer or ""))
    assert ran == ["k"]  # the queued call never ran


def test_a_bad_limit_is_refused() -> None:
    def f(x: int) -> int:
        """F."""
        return x

    for bad in (0, -1, 1.5, True):
        with pytest.raises(ToolDefinitionError, match="max_concurrency"):
            tool(max_concurrency=bad)(f)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="max_concurrency"):
            ToolRule(max_concurrency=bad)  # type: ignore[arg-type]
    assert tool(f).with_options(max_concurrency=2).max_concurrency == 2


def test_an_unknown_option_is_refused() -> None:
    def f(x: int) -> int:
        """F."""
        return x

    with pytest.raises(TypeError, match="'timout'"):
        tool(timout=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'retries'"):
        Tool(f, retries=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'slow'"):
        Tool.from_schema(name="g", description="G.", parameters={"type": "object"},
                         fn=lambda args: args, slow=True)  # type: ignore[call-arg]

"""Warm-ups (miniagent.core.tools.warmup, Agent.start): once per process, concurrent starts share
the one in flight, a failing or hanging warm-up is reported and the tool still answers, and the
first call of a started agent is warm. Real tools and agents with a scripted model; no timing
asserts (a hanging warm-up is cut by a short warm-up timeout, and the report says so)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, ScriptedModel, Tool, tool
from miniagent.core.errors import ToolDefinitionError, UserError
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.tools.warmup import Warmup, run_warmups
from miniagent.core.tools.warmup_record import forget
from miniagent.core.tools.wrappers import Filtered, Prefixed, WithRules
from miniagent.core.types import Observation, ToolCall


def call(name: str, **arguments: Any) -> str:
    return f"Thought: use {name}\nAction: {name}\nAction Input: {json.dumps(arguments)}"


def model(*replies: str) -> ScriptedModel:
    return ScriptedModel([*replies, "Final Answer: done"])


class Index:
    """A tool's slow state: its warm-up loads it, its calls say whether it was loaded first."""

    def __init__(self) -> None:
        self.loads = 0

    async def load(self) -> None:
        self.loads += 1
        await asyncio.sleep(0)  # a real await: concurrent starts overlap here

    def search(self, query: str) -> str:
        return f"{query}: {'warm' if self.loads else 'cold'} (loads={self.loads})"


def search_tool(index: Index, **options: Any) -> Tool:
    def search(query: str) -> str:
        """Search the index."""
        return index.search(query)

    return tool(search, **{"warmup": index.load, **options})  # type: ignore[call-overload]


# -- once per process ---------------------------------------------------------------------

async def test_two_agents_and_concurrent_starts_warm_a_shared_tool_once() -> None:
    index = Index()
    search = search_tool(index)
    first, second = Agent(model=model(), tools=[search]), Agent(model=model(), tools=[search])
    reports = await asyncio.gather(first.start(), second.start(), first.start())
    assert index.loads == 1
    statuses = sorted(report.outcomes[0].status for report in reports)
    assert statuses == ["already_warm", "already_warm", "warmed"]
    assert all(report.ok for report in reports)
    later = await Agent(model=model(), tools=[search]).start()
    assert index.loads == 1 and later.outcomes[0].status == "already_warm"


async def test_the_first_call_after_start_is_warm_and_without_start_cold() -> None:
    cold_index, warm_index = Index(), Index()
    cold = Agent(model=model(call("search", query="cats")), tools=[search_tool(cold_index)])
    result = await cold.arun("find cats")
    assert result.steps[0].observations[0].output == "cats: cold (loads=0)"

    async with Agent(model=model(call("search", query="cats")),
                     tools=[search_tool(warm_index)]) as agent:
        assert agent.warmup_report is not None and agent.warmup_report.warmed == ["tool search"]
        result = await agent.arun("find cats")
    assert result.status == "completed"
    assert result.steps[0].observations[0].output == "cats: warm (loads=1)"


def test_warm_up_is_the_synchronous_start() -> None:
    loaded: list[str] = []

    @tool(warmup=lambda: loaded.append("loaded"))  # a sync warm-up: run on a worker thread
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"{key} after {loaded}"

    agent = Agent(model=model(call("lookup", key="k")), tools=[lookup])
    report = agent.warm_up()
    assert report.ok and report.warmed == ["tool lookup"] and loaded == ["loaded"]
    result = agent.run("look k up")
    assert result.steps[0].observations[0].output == "k after ['loaded']"
    assert agent.warm_up().outcomes[0].status == "already_warm" and loaded == ["loaded"]


# -- failures --------------------------------------------------------------------------------

async def test_a_failing_warm_up_is_reported_logged_and_the_tool_still_answers(
        caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[int] = []

    def broken() -> None:
        attempts.append(1)
        raise RuntimeError("index file missing")

    @tool(warmup=broken)
    def search(query: str) -> str:
        """Search."""
        return f"found {query} without the index"

    agent = Agent(model=model(call("search", query="cats")), tools=[search])
    with caplog.at_level(logging.WARNING, logger="miniagent"):
        report = await agent.start()
    assert not report.ok and report.warmed == []
    [failed] = report.failed
    assert (failed.name, failed.status) == ("tool search", "failed")
    assert failed.error == "RuntimeError: index file missing"
    assert "warm-up of tool search failed: RuntimeError: index file missing" in caplog.text
    assert "failed: tool search: RuntimeError: index file missing" in str(report)
    result = await agent.arun("find cats")
    assert result.status == "completed"
    assert result.steps[0].observations[0].output == "found cats without the index"
    await agent.start()  # a failure is not recorded as warm: the next start tries again
    assert len(attempts) == 2


async def test_a_hanging_warm_up_is_cut_at_its_timeout_and_the_tool_answers() -> None:
    never = asyncio.Event()
    stuck_thread = threading.Event()

    async def hangs() -> None:
        await never.wait()

    @tool(warmup=hangs)
    def fetch(url: str) -> str:
        """Fetch a page."""
        return f"fetched {url}"

    @tool(warmup=lambda: stuck_thread.wait(30))  # a sync one cannot be stopped: left behind
    def parse(text: str) -> str:
        """Parse a page."""
        return f"parsed {text}"

    agent = Agent(model=model(call("fetch", url="u"), call("parse", text="t")),
                  tools=[fetch, parse])
    try:
        report = await agent.start(timeout=0.2)
        assert [(o.name, o.status) for o in report.outcomes] == [
            ("tool fetch", "timed_out"), ("tool parse", "timed_out")]
        assert all(o.error == "did not finish within 0.2 s (warm-up timeout)"
                   for o in report.outcomes)
        result = await agent.arun("fetch and parse")
        assert result.status == "completed"
        assert [s.observations[0].output for s in result.steps[:2]] == ["fetched u", "parsed t"]
    finally:
        stuck_thread.set()


async def test_a_start_waiting_for_a_failing_warm_up_in_flight_reports_its_failure() -> None:
    gate = asyncio.Event()

    async def slow_failure() -> None:
        await gate.wait()
        raise ConnectionError("pool refused")

    shared = Warmup(name="pool", key=slow_failure, run=slow_failure)
    owner = asyncio.ensure_future(run_warmups([shared], timeout=5.0))
    await asyncio.sleep(0)  # the owner claims the warm-up
    waiter = asyncio.ensure_future(run_warmups([shared], timeout=5.0))
    await asyncio.sleep(0)
    gate.set()
    for report in await asyncio.gather(owner, waiter):
        assert report.outcomes[0].status == "failed"
        assert report.outcomes[0].error == "ConnectionError: pool refused"


# -- sources ---------------------------------------------------------------------------------

class CountingSource:
    """A tool source with a warm-up (as an MCP server has): counts them, answers calls."""

    def __init__(self) -> None:
        self.warmups = 0
        self.closed = 0
        self.echo = Tool.from_schema(name="echo", description="Echo.", parameters={
            "type": "object", "properties": {"text": {"type": "string"}}}, fn=lambda a: a)

    def __repr__(self) -> str:
        return "CountingSource()"

    async def warmup(self) -> None:
        self.warmups += 1

    async def list_tools(self) -> Sequence[Tool]:
        return [self.echo]

    async def call_tool(self, call: ToolCall, context: Any = None) -> Observation:
        return Observation(call_id=call.id, tool_name=call.name,
                           output=f"{call.arguments['text']} (warm-ups: {self.warmups})")

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_source_warms_once_until_an_agent_closes_it() -> None:
    source = CountingSource()
    agent = Agent(model=model(call("echo", text="hi")), tools=[source])
    other = Agent(model=model(), tools=[source])
    await asyncio.gather(agent.start(), other.start())
    assert source.warmups == 1
    result = await agent.arun("say hi")
    assert result.steps[0].observations[0].output == "hi (warm-ups: 1)"
    await agent.aclose()  # a closed source is cold: the next start warms it again
    report = await other.start()
    assert source.warmups == 2 and report.warmed == ["CountingSource()"]


PLAIN_RUN = """
import sys
from miniagent import Agent, ScriptedModel, tool

@tool
def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

model = ScriptedModel(['Action: add\\nAction Input: {"a": 2, "b": 3}', 'Final Answer: 5'])
result = Agent(model=model, tools=[add]).run('2+3?')
print(result.final_answer, sorted(name for name in sys.modules if 'warmup' in name))
"""


def test_a_run_of_tools_without_warm_ups_never_loads_the_warm_up_record() -> None:
    """Closing a run of plain function tools has nothing to make cold: the warm-up modules stay
    off a tool call's path (issue 34)."""
    out = subprocess.run([sys.executable, "-c", PLAIN_RUN], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "5 []"


async def test_wrappers_pass_the_warm_up_on() -> None:
    source, index = CountingSource(), Index()
    agent = Agent(model=model(), tools=[
        Prefixed(Filtered(WithRules(source, {}), deny=["nothing"]), "x"),
        Prefixed(ToolRegistry([search_tool(index)]), "y")])
    report = await agent.start()
    assert report.ok and len(report.outcomes) == 2
    assert source.warmups == 1 and index.loads == 1
    plain = Prefixed(ToolRegistry([tool(lambda: "x", name="plain")]), "z")
    assert hasattr(plain, "warmup")  # a registry can always be asked (it has nothing to do)
    assert not hasattr(Prefixed(NoWarmup(), "w"), "warmup")


class NoWarmup:
    async def list_tools(self) -> Sequence[Tool]:
        return []

    async def call_tool(self, call: ToolCall, context: Any = None) -> Observation:
        raise AssertionError("never called")

    async def aclose(self) -> None:
        pass


async def test_an_agent_used_as_a_tool_warms_its_own_tools() -> None:
    index = Index()
    helper = Agent(model=model(), tools=[search_tool(index)])
    boss = Agent(model=model(), tools=[helper.as_tool(name="ask", description="Knows.")])
    report = await boss.start()
    assert report.ok and report.warmed == ["AgentTool(name='ask', max_depth=3)"]
    assert index.loads == 1


async def test_an_agent_among_its_own_tools_does_not_wait_for_itself() -> None:
    index = Index()
    agent = Agent(model=model(), tools=[search_tool(index)])
    agent.sources.append(agent.as_tool(name="me", description="Myself."))
    report = await agent.start(timeout=5.0)
    assert report.ok, report
    assert index.loads == 1


# -- declaring ---------------------------------------------------------------------------------

def test_warmup_is_declared_on_every_kind_of_tool() -> None:
    def ready() -> None:
        pass

    schema = Tool.from_schema(name="s", description="S.", parameters={"type": "object"},
                              fn=lambda a: a, warmup=ready)
    assert schema.warmup is ready
    plain = tool(lambda: 1, name="p")
    assert plain.warmup is None and plain.with_options(warmup=ready).warmup is ready
    assert tool(warmup=ready)(plain).warmup is ready
    with pytest.raises(ToolDefinitionError, match="warmup 'soon' is not callable"):
        tool(lambda: 1, name="q", warmup="soon")  # type: ignore[call-overload]
    for bad in (0, -1, float("nan"), "10", True):
        with pytest.raises(UserError, match="warmup_timeout must be a positive number"):
            Agent(model=model()).warm_up(timeout=bad)  # type: ignore[arg-type]


async def test_forget_makes_a_key_cold_again() -> None:
    runs: list[int] = []
    key = object()
    warm = Warmup(name="k", key=key, run=lambda: runs.append(1))
    await run_warmups([warm], timeout=1.0)
    await run_warmups([warm], timeout=1.0)
    forget(key)
    await run_warmups([warm], timeout=1.0)
    assert runs == [1, 1]


async def test_nothing_to_warm_is_an_empty_ok_report() -> None:
    report = await Agent(model=model()).start()
    assert report.ok and report.outcomes == () and str(report) == "nothing to warm up"


async def test_the_record_does_not_keep_a_warmed_source_alive() -> None:
    source = CountingSource()
    await Agent(model=model(), tools=[source]).start()
    assert source.warmups == 1
    gone = weakref.ref(source)
    del source
    gc.collect()
    assert gone() is None  # a model's weights, a server's pipes: freed with their owner


# -- a warm-up left behind (timeout, cancelled start) runs once, and settles the record ------

async def test_a_sync_warm_up_past_its_timeout_is_waited_for_not_started_again() -> None:
    release, runs = threading.Event(), []

    def load() -> None:  # a thread cannot be stopped: it runs on past the timeout
        runs.append("load")
        release.wait(30)

    shared = Warmup(name="weights", key=load, run=load)
    try:
        first = await run_warmups([shared], timeout=0.1)
        second = await run_warmups([shared], timeout=0.1)  # the first one still runs
        assert [first.outcomes[0].status, second.outcomes[0].status] == ["timed_out"] * 2
        assert second.outcomes[0].error == (
            "waited 0.1 s for the warm-up in flight (warm-up timeout)")
        assert runs == ["load"]  # one thread at a time per warm-up, never a second load
    finally:
        release.set()
    third = await run_warmups([shared], timeout=None)  # waits for the thread left behind
    assert (third.outcomes[0].status, runs) == ("already_warm", ["load"])


async def test_an_async_warm_up_that_ignores_cancellation_is_left_behind_once() -> None:
    gate, runs = asyncio.Event(), []

    async def stubborn() -> None:
        runs.append("open")
        for _ in range(3):  # swallows the timeout's cancellation, then waits on
            try:
                await gate.wait()
                return
            except asyncio.CancelledError:
                continue

    shared = Warmup(name="pool", key=stubborn, run=stubborn)
    first = await run_warmups([shared], timeout=0.1)
    second = await run_warmups([shared], timeout=0.1)
    assert [first.outcomes[0].status, second.outcomes[0].status] == ["timed_out"] * 2
    assert runs == ["open"]
    gate.set()
    third = await run_warmups([shared], timeout=None)
    assert (third.outcomes[0].status, runs) == ("already_warm", ["open"])


async def test_a_cancelled_start_leaves_its_thread_to_settle_the_record() -> None:
    started, release, runs = threading.Event(), threading.Event(), []

    def load() -> None:
        runs.append("load")
        started.set()
        release.wait(30)

    shared = Warmup(name="index", key=load, run=load)
    start = asyncio.ensure_future(run_warmups([shared], timeout=None))
    try:
        await asyncio.to_thread(started.wait, 30)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        again = await run_warmups([shared], timeout=0.1)  # the thread still loads
        assert (again.outcomes[0].status, runs) == ("timed_out", ["load"])
    finally:
        release.set()
    last = await run_warmups([shared], timeout=None)
    assert (last.outcomes[0].status, runs) == ("already_warm", ["load"])


# -- what is the same thing to warm: bound methods, wrapped sources ------------------------

async def test_a_bound_method_given_to_two_tools_warms_once() -> None:
    index = Index()  # index.load is a new bound method object at each access

    @tool(warmup=index.load)
    def search(query: str) -> str:
        """Search the index."""
        return index.search(query)

    @tool(warmup=index.load)
    def count(query: str) -> int:
        """Count the hits."""
        return len(query)

    report = await Agent(model=model(), tools=[search, count]).start()
    assert [o.status for o in report.outcomes] == ["warmed", "already_warm"]
    assert index.loads == 1


async def test_a_source_and_its_wrapper_are_one_thing_to_warm_and_to_close() -> None:
    source = CountingSource()
    bare = Agent(model=model(), tools=[source])
    wrapped = Agent(model=model(), tools=[Prefixed(Filtered(source, deny=["x"]), "p")])
    await bare.start()
    report = await wrapped.start()
    assert (source.warmups, report.outcomes[0].status) == (1, "already_warm")
    await bare.aclose()  # the source's connection is gone for the wrapped agent too
    again = await wrapped.start()
    assert (source.warmups, again.outcomes[0].status) == (2, "warmed")
    await wrapped.aclose()
    assert (await bare.start()).outcomes[0].status == "warmed"


async def test_what_a_sync_warm_up_returns_after_its_start_gave_up_is_dropped() -> None:
    started, release, closed = threading.Event(), threading.Event(), threading.Event()

    class Opening:
        """What a sync wrapper returns for its caller to await; its close() is seen."""

        def __await__(self) -> Any:
            yield from asyncio.sleep(0).__await__()

        def close(self) -> None:
            closed.set()

    def open_later() -> Opening:
        started.set()
        release.wait(30)
        return Opening()

    shared = Warmup(name="pool", key=open_later, run=open_later)
    start = asyncio.ensure_future(run_warmups([shared], timeout=None))
    await asyncio.to_thread(started.wait, 30)
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    release.set()  # it returns its awaitable now: nobody is left to await it
    assert await asyncio.to_thread(closed.wait, 30)  # dropped, and the record settled
    again = await run_warmups([shared], timeout=None)  # not waiting forever for it
    assert again.outcomes[0].status == "warmed"


def test_an_async_warm_up_abandoned_with_its_event_loop_is_run_again_in_the_next() -> None:
    from miniagent._internal.aio import run_coroutine

    runs: list[str] = []

    async def stubborn() -> None:
        runs.append("open")
        if len(runs) > 1:  # the second time, it opens at once
            return
        for _ in range(3):  # swallows the cancellations of its start and of the loop's end
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)

    shared = Warmup(name="pool", key=stubborn, run=stubborn)
    first = run_coroutine(run_warmups([shared], timeout=0.1))  # left behind, then abandoned
    assert first.outcomes[0].status == "timed_out"
    # its loop is closed: nothing will ever settle it, so the next loop runs it again
    again = asyncio.run(run_warmups([shared], timeout=5.0))
    assert [again.outcomes[0].status, len(runs)] == ["warmed", 2]


PROGRAM = '''
import asyncio, gc, logging, sys
from miniagent import Agent, ScriptedModel, tool

logging.getLogger("miniagent.warmup").disabled = True  # the report says it (as the CLI does)


async def load_index():
    await asyncio.sleep(3600)


@tool(warmup=load_index)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: found"


async def main():
    agent = Agent(model=ScriptedModel(["Final Answer: done"]), tools=[lookup])
    await agent.start(timeout=float(sys.argv[1]))
    try:
        print((await agent.arun("q")).final_answer)
    finally:
        await agent.aclose()

asyncio.run(main())
gc.collect()
'''


def test_a_warm_up_cut_at_its_timeout_leaves_nothing_on_stderr(tmp_path: Path) -> None:
    """The waiter that gave up still retrieves how the warm-up ended: asyncio has no "Future
    exception was never retrieved" to print after the answer."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), "0.1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "done"
    assert done.stderr == ""

"""The drivers of the conformance suite, and what is compared between them.

Every scenario builds the same agent (a fresh model and fresh tools) on each driver and acts on
it the same way: run a question, maybe decide on what waits, resume. Its :class:`Outcome` (status,
reason, final answer, observation texts, call states and moves, transitions, event kinds in
order, the JSONL trace's records, and the token usage) must be the same on every driver:

- ``memory``: in process, sessions in a :class:`~miniagent.InMemoryStore`;
- ``sqlite``: in process, sessions in a real SQLite file;
- ``temporal``: the session as a workflow on a real Temporal dev server, run by a worker in this
  process, followed by the agent's client;
- ``minimal``: a test driver that implements the effects and nothing else (sessions saved as
  JSON in a dict, ids from a counter, no lease, no bus) over the same
  :func:`~miniagent.core.runtime.loop.run_session`: what a new driver needs to write.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_core import to_jsonable_python

from miniagent import Agent, InMemoryStore, SQLiteStore
from miniagent.core.models.base import Model
from miniagent.core.runtime.events import Event
from miniagent.core.runtime.fork import fork_session
from miniagent.core.runtime.loop import run_session
from miniagent.core.runtime.run import rules_for
from miniagent.core.session import FINAL, AgentSession, decide
from miniagent.core.tools.toolbox import Toolbox
from miniagent.core.trace.jsonl import JsonlTracer
from miniagent.core.types import (
    CallRecord,
    Decision,
    ModelRequest,
    ModelResponse,
    Observation,
    PendingApproval,
    RunResult,
    ToolCall,
    ToolContext,
)

if TYPE_CHECKING:
    from miniagent.temporal import TemporalAgent


@dataclass
class Setup:
    """An agent to build on each driver, from scratch every time."""

    model: Callable[[], Model]
    tools: Callable[[], Sequence[Any]] = list
    options: dict[str, Any] = field(default_factory=dict)


class Handle(Protocol):
    """What a scenario does with the agent on one driver."""

    agent: Agent | TemporalAgent
    events: list[Event]
    trace: Path

    async def run(self, question: str, session_id: str | None = None) -> RunResult:
        """Answer ``question``; with the id of a session that exists, as its next turn."""
        ...

    async def decide(self, session_id: str, approved: bool, call_id: str | None = None,
                     reason: str | None = None, *,
                     arguments: dict[str, Any] | None = None) -> None: ...

    async def resume(self, session_id: str) -> RunResult: ...

    async def stream(self, question: str) -> list[Event]:
        """Answer ``question`` as a stream: the items it yielded, in order."""
        ...

    async def session(self, session_id: str) -> AgentSession: ...

    async def fork(self, session_id: str, at_step: int) -> str:
        """A new session of the first ``at_step`` steps of ``session_id``; its id."""
        ...

    async def crash(self, running: asyncio.Task[RunResult], session_id: str) -> RunResult:
        """Kill what runs the session while a tool call is under way (the process, or the
        Temporal worker), then go on as a person would (resume); the result."""
        ...


@dataclass
class AgentHandle:
    """The agent's own API, whichever driver it runs on."""

    agent: Agent | TemporalAgent
    events: list[Event]
    trace: Path

    async def run(self, question: str, session_id: str | None = None) -> RunResult:
        return await self.agent.arun(question, session_id=session_id)

    async def decide(self, session_id: str, approved: bool, call_id: str | None = None,
                     reason: str | None = None, *,
                     arguments: dict[str, Any] | None = None) -> None:
        if approved:
            await self.agent.aapprove(session_id, call_id, reason, arguments=arguments)
        else:
            await self.agent.adeny(session_id, call_id, reason)

    async def resume(self, session_id: str) -> RunResult:
        return await self.agent.aresume(session_id)

    async def stream(self, question: str) -> list[Event]:
        return [event async for event in self.agent.astream(question)]

    async def session(self, session_id: str) -> AgentSession:
        return await self.agent.asession(session_id)

    async def fork(self, session_id: str, at_step: int) -> str:
        return await self.agent.afork(session_id, at_step=at_step)

    async def crash(self, running: asyncio.Task[RunResult], session_id: str) -> RunResult:
        """In process: the run stops where it was (its last checkpoint: the call started) and a
        resume goes on from the store, as after a killed process."""
        running.cancel()
        await asyncio.wait({running})
        return await self.resume(session_id)


@dataclass
class TemporalHandle(AgentHandle):
    """The agent on Temporal, with a worker this handle can kill and replace."""

    worker: Any = None
    serving: asyncio.Task[None] | None = None

    async def start_worker(self) -> None:
        from miniagent.temporal import agent_worker

        self.worker = await agent_worker(self.agent)
        self.serving = asyncio.ensure_future(self.worker.run())

    async def stop_worker(self) -> None:
        if self.worker is not None:
            await self.worker.shutdown()  # in-flight activities are cancelled at once
            self.worker = None

    async def crash(self, running: asyncio.Task[RunResult], session_id: str) -> RunResult:
        """The worker dies mid-call; a new one takes over; the client keeps following."""
        await self.stop_worker()
        await self.start_worker()
        return await running


class Driver(Protocol):
    name: str

    def open(self, setup: Setup, folder: Path) -> contextlib.AbstractAsyncContextManager[Handle]:
        ...


def _observed(agent: Agent | TemporalAgent, folder: Path, name: str
              ) -> tuple[list[Event], Path, JsonlTracer]:
    events: list[Event] = []
    trace = folder / f"{name}.jsonl"
    tracer = JsonlTracer(trace)
    agent.subscribe(events.append)
    agent.subscribe(tracer)
    return events, trace, tracer


@dataclass
class InProcess:
    """The in-process driver, over a memory or a SQLite store."""

    name: str

    @contextlib.asynccontextmanager
    async def open(self, setup: Setup, folder: Path) -> AsyncIterator[Handle]:
        store = InMemoryStore() if self.name == "memory" else SQLiteStore(folder / "sessions.db")
        agent = Agent(model=setup.model(), tools=setup.tools(), store=store, **setup.options)
        events, trace, tracer = _observed(agent, folder, self.name)
        try:
            yield AgentHandle(agent, events, trace)
        finally:
            await agent.aclose()
            tracer.close()


@dataclass
class OnTemporal:
    """Sessions as workflows on a real dev server; the worker runs in this process."""

    client: Any
    name: str = "temporal"

    @contextlib.asynccontextmanager
    async def open(self, setup: Setup, folder: Path) -> AsyncIterator[Handle]:
        from miniagent.temporal import TemporalAgent

        agent = TemporalAgent(Agent(model=setup.model(), tools=setup.tools(), **setup.options),
                              self.client, task_queue=f"conf-{uuid.uuid4().hex[:12]}")
        events, trace, tracer = _observed(agent, folder, self.name)
        handle = TemporalHandle(agent, events, trace)
        await handle.start_worker()
        try:
            yield handle
        finally:
            await handle.stop_worker()
            await agent.aclose()
            tracer.close()


# -- the minimal driver: effects, and nothing else --------------------------------------------


@dataclass
class MinimalEffects:
    """Every effect the step logic needs, done the plainest way."""

    model: Model
    tools: Toolbox
    saved: dict[str, str]
    sink: Callable[[Event], None]
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        return await self.model.generate(request)

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        return await self.tools.execute(call, context)

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        self.saved[session.id] = json.dumps(session.to_dict(), ensure_ascii=False)

    async def wait_for_decision(self, pending: list[PendingApproval], until: float | None
                                ) -> dict[str, Decision]:
        return {}  # a person decides later, on the saved session

    def now(self) -> float:
        return time.time()

    def new_id(self) -> str:
        return f"{next(self._ids):016x}"

    observed = True

    def emit(self, event: Event) -> None:
        self.sink(event)


@dataclass
class MinimalHandle:
    agent: Agent
    events: list[Event]
    trace: Path
    tracer: JsonlTracer
    saved: dict[str, str] = field(default_factory=dict)
    runs: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    """One counter for every run of the handle: span ids never repeat."""

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        self.tracer(event)

    async def run(self, question: str, session_id: str | None = None) -> RunResult:
        if session_id in self.saved:
            session = self._load(session_id)
            session.new_turn(question, at=time.time())
        else:
            session = AgentSession.start(question, id=session_id or f"min-{next(self.runs)}",
                                         at=time.time())
        return await self._go(session)

    async def _go(self, session: AgentSession) -> RunResult:
        agent = self.agent
        assert agent.model is not None
        tools = await Toolbox.gather(agent.sources)
        rules = rules_for(agent.spec, tools, protocol=agent.protocol)
        effects = MinimalEffects(agent.model, tools, self.saved, self._emit, _ids=self.ids)
        return await run_session(session, rules, effects)

    def _load(self, session_id: str) -> AgentSession:
        return AgentSession.from_dict(json.loads(self.saved[session_id]))

    async def decide(self, session_id: str, approved: bool, call_id: str | None = None,
                     reason: str | None = None, *,
                     arguments: dict[str, Any] | None = None) -> None:
        session = self._load(session_id)
        decide(session, call_id, approved, reason, at=time.time(), arguments=arguments)
        self.saved[session_id] = json.dumps(session.to_dict(), ensure_ascii=False)

    async def resume(self, session_id: str) -> RunResult:
        session = self._load(session_id)
        if session.status in FINAL:
            return session.result()
        if session.status != "running":
            session.transition("running", f"resumed from {session.status}", at=time.time())
        return await self._go(session)

    async def stream(self, question: str) -> list[Event]:
        """A driver without a bus streams what it emits: the run's events, as they came."""
        before = len(self.events)
        await self.run(question)
        return self.events[before:]

    async def session(self, session_id: str) -> AgentSession:
        return self._load(session_id)

    async def fork(self, session_id: str, at_step: int) -> str:
        child = fork_session(self._load(session_id), at_step, id=f"min-{next(self.runs)}",
                             at=time.time())
        self.saved[child.id] = json.dumps(child.to_dict(), ensure_ascii=False)
        return child.id

    async def crash(self, running: asyncio.Task[RunResult], session_id: str) -> RunResult:
        running.cancel()
        await asyncio.wait({running})
        return await self.resume(session_id)


@dataclass
class Minimal:
    name: str = "minimal"

    @contextlib.asynccontextmanager
    async def open(self, setup: Setup, folder: Path) -> AsyncIterator[Handle]:
        agent = Agent(model=setup.model(), tools=setup.tools(), **setup.options)
        trace = folder / f"{self.name}.jsonl"
        tracer = JsonlTracer(trace)
        try:
            yield MinimalHandle(agent, [], trace, tracer)
        finally:
            await agent.aclose()
            tracer.close()


# -- what is compared ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a user of any driver sees of a session (times and random ids left out)."""

    status: str
    reason: str
    final_answer: str | None
    observations: list[str]
    calls: list[tuple[str, str, list[str]]]
    """Each call: its tool, its state, the states it moved to."""
    transitions: list[tuple[str, str]]
    events: list[str]
    trace: list[tuple[str, Any]]
    """Each JSONL record: its kind, and what it says that must not differ."""
    usage: tuple[int | None, int]
    """The run's total tokens (None: not all reported) and what the token budget counted."""
    attempts: list[int] = field(default_factory=list)
    """How many times the executor ran each call (tool retries)."""
    models: list[str | None] = field(default_factory=list)
    """Which model answered each step, where its model says it (a FallbackModel's)."""
    arguments: list[tuple[dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)
    """Each call's arguments: the model's, and a person's edit (None: not edited)."""
    output: Any = None
    """A typed run's output as JSON (an instance of the output type where a facade made one,
    the JSON value where a driver has none: the same JSON)."""


_ID = re.compile(r"\b(call_[0-9a-f]{16}|call_\d+_\d+|[0-9a-f]{16})\b")
"""Ids drawn by a driver (or numbered by the stub server per request), not by the scenario."""


def one_run(items: Sequence[Any], kind: Callable[[Any], str]) -> list[Any]:
    """``items`` with the run boundaries inside a session dropped: a run that stopped for a
    person and the run that resumed it read as one (on Temporal the workflow never stops), and
    streamed deltas (a transport's, not the step logic's) left out."""
    kept: list[Any] = []
    for item in items:
        if kind(item) == "model_delta":
            continue
        if kind(item) == "run_started" and kept and kind(kept[-1]) == "run_finished":
            kept.pop()
            continue
        kept.append(item)
    return kept


def kinds(events: Sequence[str]) -> list[str]:
    return one_run(events, str)


def _record_detail(record: dict[str, Any]) -> Any:
    kind = record.get("kind")
    if kind == "tool_finished":
        return record["observation"]["output"], record["observation"]["attempts"]
    if kind == "model_started":
        return _ID.sub("<id>", json.dumps(record["request"]["messages"], ensure_ascii=False))
    if kind == "guard_intervened":
        return record["guard"]
    if kind == "run_finished":
        return record["result"]["status"]
    if kind == "model_responded":
        return record["response"].get("model")
    return None


def trace_records(path: Path, session_id: str) -> list[tuple[str, Any]]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    mine = one_run([r for r in records if r.get("session_id") == session_id],
                   lambda r: str(r["kind"]))
    return [(r["kind"], _record_detail(r)) for r in mine]


async def outcome(handle: Handle, result: RunResult) -> Outcome:
    session = await handle.session(result.session_id)
    records = [r for s in session.steps for r in s.calls]
    mine = [e.kind for e in handle.events if e.session_id == session.id]
    return Outcome(
        status=result.status, reason=result.reason, final_answer=result.final_answer,
        observations=[r.observation.output for r in records if r.observation is not None],
        calls=[(r.call.name, r.state, [m.target for m in r.moves]) for r in records],
        transitions=[(t.source, t.target) for t in session.transitions],
        events=kinds(mine), trace=trace_records(handle.trace, session.id),
        usage=(result.usage.total_tokens, result.usage.counted_tokens),
        attempts=[r.observation.attempts for r in records if r.observation is not None],
        models=[step.model for step in session.steps],
        arguments=[(r.call.arguments, r.edited_arguments) for r in records],
        output=to_jsonable_python(result.output))

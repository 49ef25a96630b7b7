"""The step logic driven by a fake driver: replay to a byte-identical session, phases, and the
rule that the step logic module imports nothing with effects."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from miniagent import Agent, ModelResponse, Observation, ScriptedModel, ToolRegistry, tool
from miniagent.core.errors import ModelConnectionError
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.runtime.events import Event
from miniagent.core.runtime.guards import Limits
from miniagent.core.runtime.loop import StepLogic, run_session
from miniagent.core.runtime.run import AgentSpec, Rules
from miniagent.core.session import AgentSession
from miniagent.core.types import (
    CallRecord,
    Decision,
    ModelRequest,
    PendingApproval,
    ToolCall,
    ToolContext,
)
from tool_calls import execute, toolbox_of


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


TOOLS = ToolRegistry([add, send])


@dataclass
class FakeEffects:
    """A driver for tests: ids from a counter, a clock that ticks, replies from a script.

    With ``observations`` given, tool calls are answered from them instead of running
    (a replay); otherwise they run for real and are recorded.
    """

    script: list[ModelResponse]
    observations: dict[str, Observation] | None = None
    decisions: dict[str, Decision] = field(default_factory=dict)
    recorded: dict[str, Observation] = field(default_factory=dict)
    saved: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(1_000))

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def run_tool(self, call: ToolCall, context: ToolContext) -> Observation:
        if self.observations is not None:
            return self.observations[call.id]
        observation = await execute(TOOLS, call, context)
        self.recorded[call.id] = observation
        return observation

    async def checkpoint(self, session: AgentSession, call: CallRecord | None = None) -> None:
        self.saved.append(json.dumps(session.to_dict(), ensure_ascii=False))

    async def wait_for_decision(self, pending: list[PendingApproval], until: float | None = None
                                ) -> dict[str, Decision]:
        return {p.call_id: self.decisions[p.tool] for p in pending if p.tool in self.decisions}

    def now(self) -> float:
        return float(next(self._clock))

    def new_id(self) -> str:
        return f"{next(self._ids):04x}"

    observed: bool = True

    def emit(self, event: Event) -> None:
        self.events.append(event)


def replies() -> list[ModelResponse]:
    return [
        ModelResponse(content='Thought: add\nAction: add\nAction Input: {"a": 2, "b": "3"}'),
        ModelResponse(content="no format at all"),
        ModelResponse(content='Thought: tell\nAction: send\nAction Input: {"to": "王"}'),
        ModelResponse(content="Thought: done\nFinal Answer: 5，已发送"),
    ]


def rules() -> Rules:
    return Rules(spec=AgentSpec(limits=Limits(max_steps=6)), protocol=ReactProtocol(),
                 tools=toolbox_of(TOOLS))


async def run_once(effects: FakeEffects) -> AgentSession:
    session = AgentSession.start("2+3, then tell 王", id="s-fixed", at=1.0)
    await run_session(session, rules(), effects)
    return session


async def test_replaying_recorded_effects_gives_a_byte_identical_session() -> None:
    first = FakeEffects(replies(), decisions={"send": Decision(approved=True, reason="ok")})
    original = await run_once(first)
    assert (original.status, original.final_answer) == ("completed", "5，已发送")
    replay = FakeEffects(replies(), observations=dict(first.recorded),
                         decisions={"send": Decision(approved=True, reason="ok")})
    again = await run_once(replay)
    assert json.dumps(again.to_dict(), ensure_ascii=False) == json.dumps(
        original.to_dict(), ensure_ascii=False)
    assert replay.saved == first.saved  # every checkpoint on the way, too
    # ids come from the driver, also for calls the model sent without one
    ids = [c.id for s in original.steps for c in s.tool_calls]
    assert len(ids) == 2 and all(re.fullmatch(r"call_[0-9a-f]{4}", i) for i in ids)


async def test_phases_and_the_call_state_machine_are_recorded() -> None:
    effects = FakeEffects(replies()[2:3])
    session = await run_once(effects)
    assert (session.status, session.phase) == ("awaiting_approval", "tools")
    (record,) = session.steps[0].calls
    assert [(m.source, m.target) for m in record.moves] == [("ready", "awaiting_approval")]
    assert record.moves[0].reason == "'send' needs approval"
    effects.script = replies()[3:]
    effects.decisions = {"send": Decision(approved=False, reason="not now")}
    session.transition("running", "resumed", at=2_000.0)
    await StepLogic(rules(), effects).run(session)
    assert (session.status, session.phase) == ("completed", "done")
    assert [m.target for m in record.moves] == ["awaiting_approval", "denied", "completed"]
    assert "not now" in session.messages[-2].content  # type: ignore[operator]


def test_a_forbidden_call_move_is_refused() -> None:
    from miniagent.core.types import CallRecord

    record = CallRecord(call=ToolCall(id="c", name="add"))
    record.move("started", "go", 1.0)
    record.move("completed", "done", 2.0)
    with pytest.raises(ValueError, match="cannot go from completed to started"):
        record.move("started", "again", 3.0)


async def test_events_nest_in_spans_with_a_start_and_end_per_call() -> None:
    effects = FakeEffects(replies(), decisions={"send": Decision(approved=True)})
    session = await run_once(effects)
    events = effects.events
    assert {e.session_id for e in events} == {session.id}
    (run,) = [e for e in events if e.kind == "run_started"]
    steps = {e.step: e.span_id for e in events if e.kind == "step_started"}
    assert all(e.parent_id == run.span_id for e in events if e.kind == "step_started")
    for kind in ("model_started", "model_responded", "tool_started", "tool_finished"):
        assert all(e.parent_id == steps[e.step] for e in events if e.kind == kind), kind
    starts = [e.span_id for e in events if e.kind in ("model_started", "tool_started")]
    ends = [e.span_id for e in events if e.kind in ("model_responded", "tool_finished")]
    # 4 model calls and 2 tool calls, each with its own span
    assert sorted(starts) == sorted(ends) and len(set(starts)) == len(starts) == 6
    assert [e.kind for e in events][-1] == "run_finished"
    assert [e.at for e in events] == sorted(e.at for e in events)


async def test_a_failed_model_call_has_an_end_and_leaves_the_phase_to_retry() -> None:
    effects = FakeEffects([ModelConnectionError("refused")])  # type: ignore[list-item]
    session = await run_once(effects)
    assert (session.status, session.phase) == ("error", "model")
    assert [e.kind for e in effects.events][-2:] == ["model_failed", "run_finished"]


def _module_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_step_logic_imports_no_store_threads_clock_or_randomness() -> None:
    """The step logic, and every miniagent module it needs (the protocols included: they run
    in a Temporal workflow too), is free of modules with effects."""
    forbidden = {"time", "uuid", "random", "os", "threading", "socket", "sqlite3",
                 "miniagent.core.store", "miniagent._internal.aio", "miniagent.core.models",
                 "miniagent.core.tools"}
    todo = ["miniagent.core.runtime.run", "miniagent.core.runtime.loop",
            "miniagent.core.protocol.registry"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        imports = _module_imports(Path(spec.origin))
        bad = {i for i in imports if any(i == f or i.startswith(f + ".") for f in forbidden)}
        assert not bad, f"{name} imports {sorted(bad)}"
        todo.extend(i for i in imports if i.startswith("miniagent.") and i != "miniagent")
    assert {"miniagent.core.runtime.loop", "miniagent.core.runtime.run", "miniagent.core.session",
            "miniagent.core.protocol.react"} <= seen


async def test_scripted_model_answers_from_the_request_and_checks_use() -> None:
    from miniagent import Agent

    def echo_last(request: ModelRequest) -> str:
        return "Final Answer: " + request.messages[-1]["content"].removeprefix("Observation: ")

    model = ScriptedModel(['Action: add\nAction Input: {"a": 20, "b": 22}', echo_last, "unused"])
    result = await Agent(model=model, tools=[add]).arun("q")
    assert (result.status, result.final_answer) == ("completed", "42")
    assert model.unused == 1
    with pytest.raises(AssertionError, match="1 of 3 scripted replies were never requested"):
        model.assert_all_used()


def test_call_ids_a_model_reuses_are_replaced_so_keys_stay_unique() -> None:
    """Some servers number calls call_0, call_1 afresh each turn (or twice in one reply):
    approvals, idempotency keys and sub-sessions are keyed by call id, so repeats get new ids."""
    def reply(*ids: str) -> ModelResponse:
        return ModelResponse(tool_calls=[ToolCall(id=i, name="add", arguments={"a": n, "b": 1})
                                         for n, i in enumerate(ids, start=len(ids))])

    model = ScriptedModel([reply("call_0", "call_0"), reply("call_0"), "Final Answer: done"],
                          tool_mode="native")
    agent = Agent(model=model, tools=TOOLS)
    result = agent.run("add twice, then once more")
    assert result.status == "completed"
    ids = [record.call.id for step in result.steps for record in step.calls]
    assert len(ids) == 3 and len(set(ids)) == 3 and ids[0] == "call_0"
    # the history pairs each result with its own call
    session = agent.session(result.session_id)
    answered = [m.tool_call_id for m in session.messages if m.role == "tool"]
    assert answered == ids


def test_every_event_the_step_logic_names_is_an_event_class() -> None:
    """The step logic names its events by class name (their module loads with the first
    listener), so a misspelt name would fail only where someone listens: every name it uses is
    checked here, with the fields it passes."""
    import inspect

    from miniagent.core.runtime import events, loop

    tree = ast.parse(Path(loop.__file__).read_text(encoding="utf-8"))
    named = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "_emit"]
    assert len(named) >= 14
    common = {"session_id", "span_id", "parent_id", "step", "at"}
    for call in named:
        kind = call.args[0]
        assert isinstance(kind, ast.Constant) and isinstance(kind.value, str), ast.dump(call)
        cls = getattr(events, kind.value)
        assert issubclass(cls, Event), kind.value
        fields = set(inspect.signature(cls).parameters)
        passed = {k.arg for k in call.keywords} - {"span", "parent", "step"} | common
        assert passed <= fields, (kind.value, passed - fields)

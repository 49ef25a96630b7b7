"""Every scenario on every driver: the same outcome, events and trace (see harness.py).

Each test builds one agent per driver (memory, SQLite, Temporal, the minimal test driver), acts
on it, checks what the scenario must show on the reference (the in-process memory driver), and
that every other driver gives the same :class:`~harness.Outcome`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness import Driver, Handle, InProcess, Minimal, OnTemporal, Outcome, Setup, outcome
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from miniagent import (
    Aids,
    Compression,
    FallbackModel,
    Limits,
    MemorySettings,
    ModelConnectionError,
    ModelResponse,
    ModelSettings,
    Observation,
    OpenAICompatibleModel,
    RetryPolicy,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolError,
    register_protocol,
    tool,
    tool_context,
)
from miniagent.core.errors import DecisionError, TurnRefused, UserError
from miniagent.core.models.base import Capabilities
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react import EXAMPLE_ANSWER, ReactProtocol
from miniagent.core.runtime import events as ev
from miniagent.core.runtime.loop import AT_LIMIT
from miniagent.core.session import INTERRUPTED_NOTE, ForkedFrom
from miniagent.core.throttles import endpoint, tool_slots
from miniagent.core.types import (
    Message,
    ModelRequest,
    ParsedOutput,
    RunResult,
    TokenUsage,
    ToolLike,
)
from miniagent.testing.stub_server import StubServer

pytestmark = pytest.mark.asyncio(loop_scope="session")

Act = Callable[[Handle], Awaitable[RunResult]]


@pytest.fixture
def drivers(dev_env: WorkflowEnvironment) -> list[Driver]:
    return [InProcess("memory"), InProcess("sqlite"), OnTemporal(dev_env.client), Minimal()]


async def across(drivers: Sequence[Driver], tmp_path: Path, setup: Setup, act: Act, *,
                 compare: Sequence[str] | None = None) -> Outcome:
    """``act`` on every driver; every outcome equals the first's (the fields ``compare``
    names, or all). Returns the reference outcome."""
    outcomes: dict[str, Outcome] = {}
    for driver in drivers:
        folder = tmp_path / driver.name
        folder.mkdir()
        async with driver.open(setup, folder) as handle:
            outcomes[driver.name] = await outcome(handle, await act(handle))
    reference = outcomes[drivers[0].name]
    fields = compare or list(vars(reference))
    for name, found in outcomes.items():
        for field in fields:
            assert getattr(found, field) == getattr(reference, field), f"{name}: {field}"
    return reference


def run(question: str) -> Act:
    async def act(handle: Handle) -> RunResult:
        return await handle.run(question)
    return act


def react(thought: str, name: str, args: dict[str, Any]) -> str:
    return f"Thought: {thought}\nAction: {name}\nAction Input: {json.dumps(args)}"


def native(*calls: tuple[str, str, dict[str, Any]], content: str | None = None) -> dict[str, Any]:
    return {"content": content, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls]}


# -- tools ----------------------------------------------------------------------------------

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case a text (a little slowly)."""
    await asyncio.sleep(0.2)
    return text.upper() + "！"


@tool
def long_report(topic: str) -> str:
    """A very long report."""
    return "x" * 10_000


@tool(requires_approval=lambda args: args["amount"] > 100)
def transfer(to: str, amount: int) -> str:
    """Move money; amounts over 100 need a person's approval."""
    return f"sent {amount} to {to}"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


# -- the basics -----------------------------------------------------------------------------

async def test_two_tools_in_one_step(drivers: list[Driver], tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        [native(("c1", "add", {"a": 2, "b": "3"}), ("c2", "shout", {"text": "五 is five"})),
         {"content": "5, and 五 IS FIVE！"}], tool_mode="native"), tools=lambda: [add, shout])
    got = await across(drivers, tmp_path, setup, run("add and shout"))
    assert (got.status, got.final_answer) == ("completed", "5, and 五 IS FIVE！")
    assert got.observations == ["5", "五 IS FIVE！"]
    assert got.events.count("tool_started") == 2


async def test_a_long_observation_is_truncated_once(drivers: list[Driver],
                                                    tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        [react("read", "long_report", {"topic": "t"}), "Final Answer: long"]),
        tools=lambda: [long_report])
    got = await across(drivers, tmp_path, setup, run("report"))
    (text,) = got.observations
    assert text == "x" * 4000 + "\n... [truncated 6,000 of 10,000 chars]"
    assert ("guard_intervened", "truncated") in got.trace


async def test_a_format_error_is_repaired(drivers: list[Driver], tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        ["I think the answer is near", react("use it", "add", {"a": 1, "b": 1}),
         "Final Answer: 2"]), tools=lambda: [add])
    got = await across(drivers, tmp_path, setup, run("1+1"))
    assert (got.status, got.final_answer, got.observations) == ("completed", "2", ["2"])
    assert ("guard_intervened", "format_error") in got.trace


class Invoice(BaseModel):
    number: str
    total: float


async def test_a_typed_result_is_repaired_once_then_validated(drivers: list[Driver],
                                                              tmp_path: Path) -> None:
    """Typed results (issue 35): an answer that misses a field is told to the model, which
    repairs it; the output is an Invoice in process and on Temporal, its JSON on the minimal
    driver (the same JSON)."""
    setup = Setup(model=lambda: ScriptedModel([
        react("look it up", "lookup", {"key": "A-7"}),
        'Thought: done\nFinal Answer: {"number": "A-7"}',
        'Thought: with the total\nFinal Answer: {"number": "A-7", "total": 12.5}']),
        tools=lambda: [lookup], options={"output_type": Invoice})
    outputs: list[Any] = []

    async def act(handle: Handle) -> RunResult:
        result = await handle.run("Read invoice A-7")
        outputs.append(result.output)
        return result

    got = await across(drivers, tmp_path, setup, act)
    assert (got.status, got.output) == ("completed", {"number": "A-7", "total": 12.5})
    assert got.final_answer == '{"number": "A-7", "total": 12.5}'
    assert ("guard_intervened", "output_invalid") in got.trace
    assert [type(o).__name__ for o in outputs] == ["Invoice", "Invoice", "Invoice", "dict"]


async def test_a_run_typed_on_its_own_answers_through_the_final_result_tool(
        drivers: list[Driver], tmp_path: Path) -> None:
    """A native agent typed for one run (``arun(..., output_type=...)``) on the drivers an
    agent's own API runs (the minimal driver has no such API: its scenario is the one above):
    the answer comes as a ``final_result`` call, refused once (its result tells the model why),
    then accepted; the next turn is free text again."""
    from miniagent.core.runtime.output import FINAL_RESULT

    setup = Setup(model=lambda: ScriptedModel([
        native(("c1", FINAL_RESULT, {"number": 7})),
        native(("c2", FINAL_RESULT, {"number": "A-7", "total": 12.5})),
        "plain text now"], tool_mode="native"))

    async def act(handle: Handle) -> RunResult:
        typed = await handle.agent.arun("Read invoice A-7", output_type=Invoice)
        assert typed.output == Invoice(number="A-7", total=12.5)
        repair = (await handle.session(typed.session_id)).messages[2]
        assert (repair.role, repair.tool_call_id) == ("tool", "c1")
        assert "answer.number: 7 is not of type 'string'" in (repair.content or "")
        return await handle.run("And now?", session_id=typed.session_id)

    got = await across(drivers[:3], tmp_path, setup, act)
    assert (got.status, got.final_answer, got.output) == ("completed", "plain text now", None)


async def test_a_typed_run_killed_mid_call_resumes_to_a_typed_result(
        drivers: list[Driver], tmp_path: Path) -> None:
    """A typed run whose process (or Temporal worker: the workflow replays) dies during a call
    resumes and validates its answer the same way; Chinese text stays as it is."""
    state: dict[str, Any] = {}

    def tools() -> list[Any]:
        state.update(started=asyncio.Event(), seen=[])
        return [hanging("fetch", idempotent=True, started=state["started"], seen=state["seen"])]

    setup = Setup(model=lambda: ScriptedModel([
        react("go", "fetch", {"what": "发票"}),
        'Thought: done\nFinal Answer: {"number": "发票-7", "total": 12.5}']),
        tools=tools, options={"output_type": Invoice})

    async def act(handle: Handle) -> RunResult:
        return await crashed(handle, state["started"], state["seen"])

    got = await across(drivers, tmp_path, setup, act,
                       compare=("status", "final_answer", "observations"))
    assert (got.status, got.output) == ("completed", {"number": "发票-7", "total": 12.5})
    assert got.final_answer == '{"number": "发票-7", "total": 12.5}'


async def test_an_explicit_protocol_is_the_one_used(drivers: list[Driver],
                                                    tmp_path: Path) -> None:
    """NativeProtocol over a model configured for ReAct: native requests on every driver."""
    models: list[ScriptedModel] = []

    def model() -> ScriptedModel:
        models.append(ScriptedModel([native(("c1", "add", {"a": 1, "b": 2})), {"content": "3"}],
                                    tool_mode="react"))
        return models[-1]

    setup = Setup(model=model, tools=lambda: [add], options={"protocol": NativeProtocol()})
    got = await across(drivers, tmp_path, setup, run("1+2"))
    assert (got.status, got.final_answer) == ("completed", "3")
    assert all(m.requests[0].tools and m.requests[0].stop is None for m in models)


# -- approvals ------------------------------------------------------------------------------

async def test_an_approval_predicate_that_says_no_asks_nobody(drivers: list[Driver],
                                                              tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        [react("pay", "transfer", {"to": "Ana", "amount": 5}), "Final Answer: paid"]),
        tools=lambda: [transfer])
    got = await across(drivers, tmp_path, setup, run("pay Ana 5"))
    assert (got.status, got.observations) == ("completed", ["sent 5 to Ana"])
    assert "approval_requested" not in got.events
    assert got.transitions == [("running", "completed")]


def pay_ana_500() -> Setup:
    return Setup(model=lambda: ScriptedModel(
        [react("pay", "transfer", {"to": "Ana", "amount": 500}), "Final Answer: handled"]),
        tools=lambda: [transfer])


def waits_then(decide: Callable[[Handle, RunResult], Awaitable[None]]) -> Act:
    async def act(handle: Handle) -> RunResult:
        first = await handle.run("pay Ana 500")
        assert first.status == "awaiting_approval", first.reason
        (pending,) = first.pending_approvals
        assert (pending.tool, pending.arguments) == ("transfer", {"to": "Ana", "amount": 500})
        view = await handle.session(first.session_id)
        assert view.status == "awaiting_approval"  # what every reader sees while it waits
        await decide(handle, first)
        return await handle.resume(first.session_id)
    return act


async def test_an_approval_predicate_that_says_yes_waits_and_approve_runs_it(
        drivers: list[Driver], tmp_path: Path) -> None:
    async def approve(handle: Handle, first: RunResult) -> None:
        await handle.decide(first.session_id, True, reason="fine")

    got = await across(drivers, tmp_path, pay_ana_500(), waits_then(approve))
    assert (got.status, got.observations) == ("completed", ["sent 500 to Ana"])
    assert got.calls == [("transfer", "completed",
                          ["awaiting_approval", "approved", "started", "completed"])]
    assert got.transitions == [("running", "awaiting_approval"), ("awaiting_approval", "running"),
                               ("running", "completed")]


async def test_deny_tells_the_model_why(drivers: list[Driver], tmp_path: Path) -> None:
    async def deny(handle: Handle, first: RunResult) -> None:
        await handle.decide(first.session_id, False, reason="too much")

    got = await across(drivers, tmp_path, pay_ana_500(), waits_then(deny))
    assert got.status == "completed"
    (text,) = got.observations
    assert "A person denied this call of 'transfer'" in text and "too much" in text


async def test_an_approval_with_edits_runs_the_persons_arguments(drivers: list[Driver],
                                                                 tmp_path: Path) -> None:
    """A bad edit is refused (the session still waits, nothing decided); a good one runs in
    place of the model's arguments, the record keeps both, and the model is told."""
    async def approve_less(handle: Handle, first: RunResult) -> None:
        (pending,) = first.pending_approvals
        with pytest.raises(DecisionError, match="amount: 'lots' is not of type 'integer'"):
            await handle.decide(first.session_id, True, pending.call_id,
                                arguments={"to": "Ana", "amount": "lots"})
        view = await handle.session(first.session_id)
        assert view.status == "awaiting_approval"
        assert [(r.state, r.edited_arguments) for r in view.steps[0].calls] == [
            ("awaiting_approval", None)]
        await handle.decide(first.session_id, True, pending.call_id, "too much",
                            arguments={"to": "Ana", "amount": 50})

    got = await across(drivers, tmp_path, pay_ana_500(), waits_then(approve_less))
    assert (got.status, got.final_answer) == ("completed", "handled")
    (text,) = got.observations
    note, result = text.split("\n")
    assert "approved this call with changed arguments" in note and result == "sent 50 to Ana"
    assert got.arguments == [({"to": "Ana", "amount": 500}, {"to": "Ana", "amount": 50})]
    assert got.calls == [("transfer", "completed",
                          ["awaiting_approval", "approved", "started", "completed"])]
    # the model read the note: the last request's tool message is the observation
    assert any(kind == "model_started" and "changed arguments" in detail
               for kind, detail in got.trace)


async def test_an_approval_timeout_denies_the_call(drivers: list[Driver],
                                                   tmp_path: Path) -> None:
    setup = pay_ana_500()
    setup.options["limits"] = Limits(approval_timeout=0.5)

    async def later(handle: Handle, first: RunResult) -> None:
        await asyncio.sleep(1.5)  # well past it, on every driver's clock

    got = await across(drivers, tmp_path, setup, waits_then(later))
    assert got.status == "completed"
    (text,) = got.observations
    assert "no decision within 0.5 s" in text


async def test_a_sub_agent_that_needs_approval_makes_the_parent_wait(
        drivers: list[Driver], tmp_path: Path) -> None:
    from miniagent import Agent

    def tools() -> list[Any]:
        helper = Agent(model=ScriptedModel([
            react("pay", "transfer", {"to": "Bo", "amount": 700}), "Final Answer: Bo is paid"]),
            tools=[transfer])
        return [helper.as_tool(name="treasurer", description="Pays people.")]

    setup = Setup(model=lambda: ScriptedModel(
        [react("delegate", "treasurer", {"question": "pay Bo 700"}),
         "Final Answer: the treasurer paid Bo"]), tools=tools)

    async def act(handle: Handle) -> RunResult:
        first = await handle.run("pay Bo")
        assert first.status == "awaiting_approval"
        (pending,) = first.pending_approvals
        assert pending.tool == "treasurer" and "transfer" in pending.reason
        await handle.decide(first.session_id, True)
        return await handle.resume(first.session_id)

    got = await across(drivers, tmp_path, setup, act)
    assert (got.status, got.final_answer) == ("completed", "the treasurer paid Bo")
    assert got.observations == ["Bo is paid"]


# -- interrupted calls ------------------------------------------------------------------------

def hanging(name: str, *, idempotent: bool, started: asyncio.Event,
            seen: list[str]) -> Tool:
    """A tool whose first call hangs until what runs it is killed; later calls return."""
    async def work(what: str) -> str:
        seen.append(tool_context().session_id)
        if len(seen) == 1:
            started.set()
            await asyncio.Event().wait()
        return f"{name} did {what}"

    return Tool.from_schema(name=name, description=f"{name} something.", fn=lambda a: work(
        a["what"]), parameters={"type": "object", "properties": {"what": {"type": "string"}},
                                "required": ["what"]}, idempotent=idempotent)


async def crashed(handle: Handle, started: asyncio.Event, seen: list[str]) -> RunResult:
    running = asyncio.ensure_future(handle.run("do it"))
    await asyncio.wait_for(started.wait(), 30)
    return await handle.crash(running, seen[0])


async def test_an_interrupted_idempotent_call_runs_again(drivers: list[Driver],
                                                         tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    def tools() -> list[Any]:
        state.update(started=asyncio.Event(), seen=[])
        return [hanging("fetch", idempotent=True, started=state["started"], seen=state["seen"])]

    setup = Setup(model=lambda: ScriptedModel(
        [react("go", "fetch", {"what": "the page"}), "Final Answer: fetched"]), tools=tools)

    async def act(handle: Handle) -> RunResult:
        return await crashed(handle, state["started"], state["seen"])

    # Temporal retries an idempotent activity itself, so only the outcome is compared
    got = await across(drivers, tmp_path, setup, act,
                       compare=("status", "final_answer", "observations"))
    assert (got.status, got.observations) == ("completed", ["fetch did the page"])


async def test_an_interrupted_call_that_is_not_idempotent_waits_for_a_person(
        drivers: list[Driver], tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    def tools() -> list[Any]:
        state.update(started=asyncio.Event(), seen=[])
        return [hanging("append", idempotent=False, started=state["started"],
                        seen=state["seen"])]

    setup = Setup(model=lambda: ScriptedModel(
        [react("go", "append", {"what": "a line"}), "Final Answer: appended"]), tools=tools)

    async def act(handle: Handle) -> RunResult:
        waiting = await crashed(handle, state["started"], state["seen"])
        assert waiting.status == "awaiting_approval"
        assert waiting.pending_approvals[0].reason == INTERRUPTED_NOTE
        await handle.decide(waiting.session_id, True)
        return await handle.resume(waiting.session_id)

    got = await across(drivers, tmp_path, setup, act,
                       compare=("status", "final_answer", "observations", "calls"))
    assert (got.status, got.observations) == ("completed", ["append did a line"])
    assert got.calls == [("append", "completed", ["started", "awaiting_approval", "approved",
                                                  "started", "completed"])]


async def test_a_flaky_tool_is_retried_and_has_its_effect_once(drivers: list[Driver],
                                                                tmp_path: Path) -> None:
    effects: list[str] = []

    def tools() -> list[Any]:
        tries: list[tuple[int, str]] = []

        @tool(retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
        def book(room: str) -> str:
            """Book a room (the booking service is flaky)."""
            tries.append((tool_context().attempt, tool_context().idempotency_key))
            if len(tries) < 3:
                raise ToolError("the booking service is busy", retryable=True)
            assert len({key for _, key in tries}) == 1  # one idempotency key for every try
            effects.append(room)
            return f"booked {room}"

        return [book]

    setup = Setup(model=lambda: ScriptedModel(
        [react("book it", "book", {"room": "A1"}), "Final Answer: booked"]), tools=tools)
    got = await across(drivers, tmp_path, setup, run("Book room A1"))
    assert (got.status, got.observations, got.attempts) == ("completed", ["booked A1"], [3])
    assert effects == ["A1"] * len(drivers)  # once per driver


async def test_an_inline_tool_runs_on_the_event_loop_with_its_context(drivers: list[Driver],
                                                                     tmp_path: Path) -> None:
    threads: list[str] = []

    def tools() -> list[Any]:
        @tool(inline=True)
        def price(item: str) -> str:
            """The price of an item (a dict lookup: quick, no I/O)."""
            threads.append(threading.current_thread().name)
            if item not in {"茶": 12}:
                raise ToolError(f"no price for {item}")
            return f"{item}: 12 元 (step {tool_context().step}, {tool_context().tool})"

        return [price]

    setup = Setup(model=lambda: ScriptedModel(
        [react("price it", "price", {"item": "tea"}), react("in Chinese", "price", {"item": "茶"}),
         "Final Answer: 12 元"]), tools=tools)
    got = await across(drivers, tmp_path, setup, run("What does tea cost?"))
    assert (got.status, got.final_answer) == ("completed", "12 元")
    assert got.observations[0] == "no price for tea"
    assert got.observations[1] == "茶: 12 元 (step 2, price)"
    assert len(threads) == 2 * len(drivers) and "miniagent-worker" not in threads


async def test_a_tool_limit_holds_and_the_wait_is_an_event(drivers: list[Driver],
                                                           tmp_path: Path) -> None:
    """``max_concurrency=1``: two calls of one step run one after the other (in a Temporal
    worker too: the executor runs there), and the second's wait is a ``slot_waiting`` event
    in its span, on every driver (a worker relays it to the workflow)."""
    most: list[int] = []
    seen: list[list[ev.Event]] = []

    def tools() -> list[Any]:
        state = {"now": 0, "most": 0, "done": 0}
        most.append(0)

        @tool(max_concurrency=1)
        async def book_seat(seat: str) -> str:
            """Book a seat (one booking at a time)."""
            state["now"] += 1
            most[-1] = max(most[-1], state["now"])
            try:  # the first call holds its slot until the second waits for it (at most 10 s)
                for _ in range(1000):
                    if tool_slots(book_seat).queued or state["done"]:
                        break
                    await asyncio.sleep(0.01)
                return f"booked {seat}"
            finally:
                state["now"] -= 1
                state["done"] += 1

        return [book_seat]

    async def act(handle: Handle) -> RunResult:
        result = await handle.run("book 1A and 1B")
        seen.append([e for e in handle.events if e.session_id == result.session_id])
        return result

    setup = Setup(model=lambda: ScriptedModel(
        [native(("c1", "book_seat", {"seat": "1A"}), ("c2", "book_seat", {"seat": "1B"})),
         {"content": "both booked"}], tool_mode="native"), tools=tools)
    got = await across(drivers, tmp_path, setup, act,
                       compare=("status", "final_answer", "observations", "calls"))
    assert (got.status, got.observations) == ("completed", ["booked 1A", "booked 1B"])
    assert most == [1] * len(drivers)
    reference = sorted(e.kind for e in seen[0])
    for events in seen:
        assert sorted(e.kind for e in events) == reference  # the same events, in any order
        (wait,) = [e for e in events if isinstance(e, ev.SlotWaiting)]
        assert (wait.what, wait.reason) == ("tool book_seat", "1 call at once (max_concurrency)")
        started = {e.span_id: e.call.id for e in events if isinstance(e, ev.ToolStarted)}
        assert started[wait.span_id] == wait.call_id  # in the span of the call that waited
        kinds = [e.kind for e in events]
        assert kinds.index("tool_started") < kinds.index("slot_waiting") < len(kinds) - 1 - \
            kinds[::-1].index("tool_finished")


async def test_a_model_call_waits_out_its_endpoints_back_off(drivers: list[Driver],
                                                             tmp_path: Path) -> None:
    """Another session's 429 paused the endpoint: the model call waits (in a Temporal worker
    too) and says so with ``slot_waiting`` in its span, before the reply."""
    async with StubServer(lambda request, n: "Final Answer: fine") as stub:
        def model() -> OpenAICompatibleModel:
            return OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="react")

        async def act(handle: Handle) -> RunResult:
            endpoint(stub.base_url, "m").pause(0.3)  # as after a 429 with Retry-After
            return await handle.run("how are you?")

        got = await across(drivers, tmp_path, Setup(model=model), act)
    assert (got.status, got.final_answer) == ("completed", "fine")
    assert got.events[got.events.index("model_started") + 1] == "slot_waiting"


# -- guards -----------------------------------------------------------------------------------

async def test_max_steps(drivers: list[Driver], tmp_path: Path) -> None:
    """The last request at the limit (no tools) gets an action: no answer, the limit stands."""
    setup = Setup(model=lambda: ScriptedModel(
        [react("again", "lookup", {"key": f"k{n}"}) for n in range(3)]),
        tools=lambda: [lookup], options={"limits": Limits(max_steps=2)})
    got = await across(drivers, tmp_path, setup, run("look"))
    assert (got.status, got.reason, got.final_answer) == (
        "max_steps", "no final answer after max_steps=2", None)
    assert got.observations == ["value of k0", "value of k1"]
    assert got.events.count("model_started") == 3


async def test_at_max_steps_the_model_gives_its_best_answer(drivers: list[Driver],
                                                            tmp_path: Path) -> None:
    """One last request, with no tools, asks for the best answer from the observations: the
    run still ends max_steps, with that answer, and the request is a step like any other."""
    def last(request: ModelRequest) -> ModelResponse:
        assert request.tools is None and "Tools: none." in request.messages[0]["content"]
        assert request.messages[-1]["content"] == AT_LIMIT
        return ModelResponse(content="Thought: I have two values\nFinal Answer: value of k1",
                             usage=TokenUsage(prompt_tokens=30, completion_tokens=8))

    setup = Setup(model=lambda: ScriptedModel(
        [react("again", "lookup", {"key": f"k{n}"}) for n in range(2)] + [last]),
        tools=lambda: [lookup], options={"limits": Limits(max_steps=2)})
    got = await across(drivers, tmp_path, setup, run("look"))
    assert (got.status, got.final_answer) == ("max_steps", "value of k1")
    assert got.reason == ("max_steps=2 reached: the answer was given at the limit (one last "
                          "request, with no tools)")
    assert got.events.count("step_finished") == got.events.count("model_responded") == 3
    assert got.trace[-3:] == [("guard_intervened", "max_steps"), ("step_finished", None),
                              ("run_finished", "max_steps")]
    assert got.transitions == [("running", "max_steps")]


async def test_token_budget(drivers: list[Driver], tmp_path: Path) -> None:
    def reply(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=react("more", "lookup", {"key": str(len(request.messages))}),
                             usage=TokenUsage(prompt_tokens=60, completion_tokens=10))

    setup = Setup(model=lambda: ScriptedModel([reply] * 5), tools=lambda: [lookup],
                  options={"limits": Limits(token_budget=100)})
    got = await across(drivers, tmp_path, setup, run("look"))
    assert (got.status, got.reason) == ("budget_exceeded",
                                        "used 140 tokens of a budget of 100")
    assert got.usage == (140, 140)


async def test_a_model_that_reports_no_usage(drivers: list[Driver], tmp_path: Path) -> None:
    """The token budget holds on estimates (the same on every driver), and the usage stays
    unknown."""
    def reply(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=react("more", "lookup", {"key": str(len(request.messages))}),
                             usage=TokenUsage.unknown())

    setup = Setup(model=lambda: ScriptedModel([reply] * 8), tools=lambda: [lookup],
                  options={"limits": Limits(token_budget=800)})
    got = await across(drivers, tmp_path, setup, run("查一下"))
    assert got.status == "budget_exceeded" and len(got.observations) < 8
    assert got.reason == f"used ~{got.usage[1]:,} tokens (estimated) of a budget of 800"
    assert got.usage[0] is None and got.usage[1] >= 800


async def test_the_deadline(drivers: list[Driver], tmp_path: Path) -> None:
    @tool
    async def slow(n: int) -> str:
        """Take a long time."""
        await asyncio.sleep(30)
        return "late"

    setup = Setup(model=lambda: ScriptedModel([react("wait", "slow", {"n": 1})]),
                  tools=lambda: [slow], options={"limits": Limits(timeout=1.0)})
    got = await across(drivers, tmp_path, setup, run("be slow"))
    assert (got.status, got.reason) == ("timeout", "the run exceeded its deadline of 1.0 s")
    assert got.calls == [("slow", "started", ["started"])]


async def test_loop_detection(drivers: list[Driver], tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel([react("again", "lookup", {"key": "k"})] * 4),
                  tools=lambda: [lookup], options={"limits": Limits(answer_after_repeat=False)})
    got = await across(drivers, tmp_path, setup, run("look"))
    assert got.status == "loop_detected"
    assert [g for k, g in got.trace if k == "guard_intervened"] == ["repeat", "loop_stop"]


async def test_after_a_repeat_the_next_step_must_answer(drivers: list[Driver],
                                                        tmp_path: Path) -> None:
    again = react("again", "lookup", {"key": "k"})
    setup = Setup(model=lambda: ScriptedModel([again] * 4 + ["Final Answer: value of k"]),
                  tools=lambda: [lookup])
    got = await across(drivers, tmp_path, setup, run("look"))
    assert (got.status, got.final_answer) == ("completed", "value of k")
    # two steps with the same result: step 3 must answer, and its call is refused; the next
    # repeat (the third of the call) gets the intervention, with the result to answer from
    assert [g for k, g in got.trace if k == "guard_intervened"] == ["format_error", "repeat"]
    assert got.observations[-1].endswith("Its result was: value of k")


async def test_a_cut_off_call_never_runs(drivers: list[Driver], tmp_path: Path) -> None:
    cut = ModelResponse(content='Thought: pay\nAction: transfer\nAction Input: {"to": "Ana", '
                                '"amount": 15', finish_reason="length")
    setup = Setup(model=lambda: ScriptedModel([cut, "Final Answer: not paid"]),
                  tools=lambda: [transfer],
                  options={"model_settings": ModelSettings(max_tokens=64)})
    got = await across(drivers, tmp_path, setup, run("pay Ana 1500"))
    (text,) = got.observations
    assert "was not run" in text and "max_tokens limit (64 tokens)" in text
    assert got.calls == [("transfer", "completed", ["completed"])]


async def test_an_answer_cut_off_by_max_tokens_is_never_completed(drivers: list[Driver],
                                                                   tmp_path: Path) -> None:
    """A reply that ended for length holds no answer: the model is told (a format error), in
    native and ReAct alike."""
    def cut(text: str) -> ModelResponse:
        return ModelResponse(content=text, finish_reason="length",
                             usage=TokenUsage(prompt_tokens=20, completion_tokens=64))

    setup = Setup(model=lambda: ScriptedModel(
        [cut("The value of k is val"), native(("c1", "lookup", {"key": "k"})),
         cut("It is the value of"), {"content": "value of k"}], tool_mode="native"),
        tools=lambda: [lookup], options={"model_settings": ModelSettings(max_tokens=64)})
    got = await across(drivers, tmp_path, setup, run("what is k?"))
    assert (got.status, got.final_answer, got.observations) == (
        "completed", "value of k", ["value of k"])
    assert [g for k, g in got.trace if k == "guard_intervened"] == ["format_error"] * 2
    (told, *_) = [d for k, d in got.trace if k == "model_started"][1:]
    assert "cut off at the max_tokens limit (64 tokens)" in told


async def test_plain_prose_is_the_answer_after_one_format_error(drivers: list[Driver],
                                                                tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(["The value of k is 87."] * 20),
                  tools=lambda: [lookup])
    got = await across(drivers, tmp_path, setup, run("what is k?"))
    assert (got.status, got.final_answer) == ("completed", "The value of k is 87.")
    assert [g for k, g in got.trace if k == "guard_intervened"] == ["format_error"]
    assert got.events.count("model_started") == 2


async def test_the_worked_examples_placeholders_never_reach_a_call(drivers: list[Driver],
                                                                    tmp_path: Path) -> None:
    """A call holding the example's ``"..."`` is answered without running; the example's Final
    Answer copied is no answer."""
    notes: list[str] = []

    def tools() -> list[Any]:
        @tool
        def remember(text: str) -> str:
            """Store a note."""
            notes.append(text)
            return f"stored: {text}"

        return [remember]

    setup = Setup(model=lambda: ScriptedModel(
        [react("store it", "remember", {"text": "..."}),
         react("store it", "remember", {"text": "buy milk"}),
         f"Thought: I now know the final answer\nFinal Answer: {EXAMPLE_ANSWER}",
         "Final Answer: noted"]), tools=tools,
        options={"protocol": ReactProtocol(example=True)})
    got = await across(drivers, tmp_path, setup, run("Remember to buy milk"))
    assert (got.status, got.final_answer) == ("completed", "noted")
    assert notes == ["buy milk"] * len(drivers)
    assert got.calls[0] == ("remember", "completed", ["completed"])  # answered, never run
    assert 'placeholder "..." of the example' in got.observations[0]
    assert [g for k, g in got.trace if k == "guard_intervened"] == ["placeholder",
                                                                    "format_error"]


# -- the agent's other rules ----------------------------------------------------------------

async def test_tool_choice_required(drivers: list[Driver], tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        ["Final Answer: guessing", react("use it", "add", {"a": 2, "b": 2}),
         "Final Answer: 4"]), tools=lambda: [add], options={"aids": Aids(tool_choice="required")})
    got = await across(drivers, tmp_path, setup, run("2+2"))
    assert (got.status, got.final_answer, got.observations) == ("completed", "4", ["4"])
    assert ("guard_intervened", "format_error") in got.trace


async def test_compression(drivers: list[Driver], tmp_path: Path) -> None:
    replies: list[Any] = [react("more", "long_report", {"topic": str(n)}) for n in range(4)]
    setup = Setup(model=lambda: ScriptedModel([*replies, "Final Answer: summarised"]),
                  tools=lambda: [long_report],
                  options={"compression": Compression.of("9000c", keep_last=1),
                           "limits": Limits(max_observation_chars=3000)})
    got = await across(drivers, tmp_path, setup, run("read a lot"))
    assert got.status == "completed" and "context_compacted" in got.events


async def test_a_history_past_the_compression_bound_ends_the_run(drivers: list[Driver],
                                                                  tmp_path: Path) -> None:
    @tool
    def keep(text: str) -> str:
        """Keep a note."""
        return f"kept {len(text)} characters"

    setup = Setup(model=lambda: ScriptedModel([react("keep it", "keep", {"text": "长" * 20_000}),
                                               "Final Answer: never asked"]),
                  tools=lambda: [keep], options={"compression": Compression.of("5000c")})
    got = await across(drivers, tmp_path, setup, run("keep this"))
    assert (got.status, got.observations) == ("budget_exceeded", ["kept 20000 characters"])
    assert "above its question and twice compress_at" in got.reason
    assert ("guard_intervened", "compress_at") in got.trace


async def test_a_react_step_in_a_native_reply_is_read_as_one(drivers: list[Driver],
                                                             tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        [react("add them", "add", {"a": 2, "b": 3}), "Thought: done\nFinal Answer: 5"],
        tool_mode="auto"), tools=lambda: [add])
    got = await across(drivers, tmp_path, setup, run("2+3?"))
    assert (got.status, got.final_answer, got.observations) == ("completed", "5", ["5"])


async def test_a_call_written_in_the_content_is_the_call(drivers: list[Driver],
                                                         tmp_path: Path) -> None:
    """Qwen2.5-Coder behind llama.cpp writes its native calls as text (fenced JSON, or
    ``<tool_call>`` tags): they run; JSON that names no offered tool stays an answer."""
    record = '{"name": "Ann", "key": "k"}'
    setup = Setup(model=lambda: ScriptedModel(
        [{"content": '```json\n{"name": "add", "arguments": {"a": 17, "b": 23}}\n```'},
         {"content": 'Now the key.\n<tool_call>\n{"name": "lookup", "parameters": '
                     '"{\\"key\\": \\"k\\"}"}\n</tool_call>'},
         {"content": record}], tool_mode="native"), tools=lambda: [add, lookup])
    got = await across(drivers, tmp_path, setup, run("17+23, then look k up"))
    assert (got.status, got.final_answer) == ("completed", record)
    assert got.observations == ["40", "value of k"]


async def test_a_server_that_takes_tools_but_hides_them(drivers: list[Driver],
                                                       tmp_path: Path) -> None:
    """Its first reply is plain text over a prompt too small for the tools: auto mode asks the
    same step again in ReAct, and the tool runs (the judgment replays from the recorded
    reply)."""
    hidden = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "2 + 3 is 23."}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 6}}
    setup = Setup(model=lambda: ScriptedModel(
        [hidden, react("add them", "add", {"a": 2, "b": 3}), "Thought: done\nFinal Answer: 5"],
        tool_mode="auto"), tools=lambda: [add])
    got = await across(drivers, tmp_path, setup, run("2+3?"))
    assert (got.status, got.final_answer, got.observations) == ("completed", "5", ["5"])
    assert got.events.count("step_started") == 2  # the plain reply took no step of its own
    assert "23" not in json.dumps(got.trace, ensure_ascii=False)  # nor a place in the history


async def test_tool_selection(drivers: list[Driver], tmp_path: Path) -> None:
    @tool
    def weather(city: str) -> str:
        """Current weather and forecast of a city."""
        return f"{city}: sunny"

    @tool
    def recipe(dish: str) -> str:
        """A recipe for a dish."""
        return "boil"

    setup = Setup(model=lambda: ScriptedModel(
        [react("look", "weather", {"city": "Oslo"}), "Final Answer: sunny"]),
        tools=lambda: [weather, recipe, add, lookup], options={"aids": Aids(tool_selection=2)})
    got = await across(drivers, tmp_path, setup, run("What is the weather forecast in Oslo?"))
    assert got.observations == ["Oslo: sunny"]


@tool(name="weather")
def aided_weather(city: str) -> str:
    """Current weather and forecast of a city."""
    return f"{city}: sunny, 18 °C"


@tool(name="recipe")
def aided_recipe(dish: str) -> str:
    """A recipe for a dish."""
    return "boil"


async def test_the_small_model_aids(drivers: list[Driver], tmp_path: Path) -> None:
    """Strict selection offers only the matching tool, the first step must act (a guess is
    refused), and after one round of results the next step must answer, with a quote of them;
    a question no tool matches gets no tool at all."""
    seen: list[ModelRequest] = []

    class Recording(ScriptedModel):
        async def generate(self, request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return await super().generate(request)

    aids = {"aids": Aids(tool_selection=2, strict_selection=True, act_first=True,
                         quote_answers=True),
            "limits": Limits(answer_after_results=1)}
    setup = Setup(model=lambda: Recording(
        ["Final Answer: guess", react("look", "weather", {"city": "Oslo"}),
         "Final Answer: sunny, 18 °C", "Final Answer: Rome"], grammar=True),
        tools=lambda: [aided_weather, aided_recipe, add, lookup], options=aids)

    async def two_questions(handle: Handle) -> RunResult:
        first = await handle.run("What is the weather forecast in Oslo?")
        assert (first.status, first.final_answer) == ("completed", "sunny, 18 °C")
        return await handle.run("What is the capital of Italy?")

    got = await across(drivers, tmp_path, setup, two_questions)
    assert (got.status, got.final_answer, got.observations) == ("completed", "Rome", [])
    assert len(seen) == 4 * len(drivers)
    for guess, act, answer, other in (seen[i:i + 4] for i in range(0, len(seen), 4)):
        assert "Valid tool names: weather\n" in guess.messages[0]["content"]
        assert guess.grammar is not None and "Final Answer" not in guess.grammar
        assert act.grammar is not None and "Final Answer" not in act.grammar
        assert answer.grammar is not None and "action ::=" not in answer.grammar  # one round
        assert 'final ::= "Final Answer: " (quote-' in answer.grammar  # a quote of the result
        assert "Tools: none." in other.messages[0]["content"]


async def test_the_aids_a_models_profile_names(drivers: list[Driver], tmp_path: Path) -> None:
    """A model measured to need only some aids (a small selection, one round then answer)
    gets those and no other: a question no tool matches still sees two tools (no strict
    selection), and after one round of results the next step must answer, in its own words
    (no quoted answers)."""
    seen: list[ModelRequest] = []

    class Measured(ScriptedModel):
        @property
        def capabilities(self) -> Capabilities:
            return dataclasses.replace(super().capabilities, small_model=True, grammar=True,
                                       aids=("tool_selection", "answer_after_results"))

        async def generate(self, request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return await super().generate(request)

    setup = Setup(model=lambda: Measured(
        [react("look", "weather", {"city": "Oslo"}), "Final Answer: It is sunny.",
         "Final Answer: Rome"]), tools=lambda: [aided_weather, aided_recipe, add, lookup])

    async def two_questions(handle: Handle) -> RunResult:
        first = await handle.run("What is the weather forecast in Oslo?")
        assert (first.status, first.final_answer) == ("completed", "It is sunny.")
        return await handle.run("What is the capital of Italy?")

    got = await across(drivers, tmp_path, setup, two_questions)
    assert (got.status, got.final_answer) == ("completed", "Rome")
    assert len(seen) == 3 * len(drivers)
    for act, answer, other in (seen[i:i + 3] for i in range(0, len(seen), 3)):
        assert "Example (only the format" not in act.messages[0]["content"]
        assert answer.grammar is not None and "action ::=" not in answer.grammar  # one round
        assert "quote-" not in answer.grammar
        (names,) = [line for line in other.messages[0]["content"].splitlines()
                    if line.startswith("Valid tool names: ")]
        assert len(names.split(", ")) == 2  # two tools, though the question matches none


async def test_streaming(drivers: list[Driver], tmp_path: Path) -> None:
    def reply(request: dict[str, Any], _n: int) -> Any:
        if any(m["role"] == "tool" for m in request["messages"]):
            return "The sum is 7."
        return {"content": "adding", "tool_calls": [{"name": "add",
                                                    "arguments": {"a": 3, "b": 4}}]}

    async with StubServer(reply) as stub:
        setup = Setup(model=lambda: OpenAICompatibleModel(
            base_url=stub.base_url, model="m", tool_mode="native", stream=True),
            tools=lambda: [add])
        got = await across(drivers, tmp_path, setup, run("3+4"))
    assert (got.status, got.final_answer) == ("completed", "The sum is 7.")


async def test_a_fallback_model_goes_on_with_the_next_model(drivers: list[Driver],
                                                            tmp_path: Path) -> None:
    """The primary (native tools) answers step 1 and cannot be reached for step 2: the backup,
    which takes no native tools, answers it, the step rendered in ReAct for it (in a Temporal
    worker too: the switch crosses the activity). Each step records which model answered."""
    setup = Setup(model=lambda: FallbackModel({
        "primary": ScriptedModel([native(("c1", "add", {"a": 2, "b": 3})),
                                  ModelConnectionError("connection refused")],
                                 tool_mode="native"),
        "backup": ScriptedModel(["Thought: I have it\nFinal Answer: 5"], tool_mode="react")}),
        tools=lambda: [add])

    async def act(handle: Handle) -> RunResult:
        result = await handle.run("2+3?")
        backup = handle.agent.model.models[1]  # type: ignore[union-attr]
        (sent,) = backup.requests  # one request: the step rendered in ReAct for it
        assert sent.tools is None and sent.stop and sent.protocol == "react"
        return result

    got = await across(drivers, tmp_path, setup, act)
    assert (got.status, got.final_answer, got.observations) == ("completed", "5", ["5"])
    assert got.models == ["primary", "backup"]
    answered = [detail for kind, detail in got.trace if kind == "model_responded"]
    assert answered == ["primary", "backup"]


async def test_a_conversation_of_three_turns(drivers: list[Driver], tmp_path: Path) -> None:
    """Turns 2 and 3 make sense only with turn 1 in the history; each request starts with the
    bytes of the one before it (the server's prefix cache keeps hitting)."""
    temperatures = {"Tokyo": 21, "Paris": 12}

    @tool
    def weather(city: str) -> str:
        """Current weather of a city."""
        return f"{city}: {temperatures[city]} °C"

    def reply(request: dict[str, Any], _n: int) -> str:
        said = [m["content"] for m in request["messages"] if m["role"] == "user"]
        last = request["messages"][-1]["content"]
        if "Observation:" in last or last.startswith(("Tokyo:", "Paris:")):
            return f"Thought: I have it\nFinal Answer: {last.split('Observation:')[-1].strip()}"
        if said[-1].startswith("What is the weather in Tokyo"):
            return react("look it up", "weather", {"city": "Tokyo"})
        if said[-1] == "And in Paris?" and any("weather" in q for q in said[:-1]):
            return react("the same for Paris", "weather", {"city": "Paris"})
        if said[-1] == "Which of the two is warmer?":
            seen = [m["content"] for m in request["messages"]]
            warmer = "Tokyo" if any("21 °C" in t for t in seen) and any(
                "12 °C" in t for t in seen) else "I cannot tell"
            return f"Thought: compare\nFinal Answer: {warmer}"
        return "Thought: ?\nFinal Answer: I do not know what you mean"

    async def converse(handle: Handle) -> RunResult:
        first = len(stub.requests)
        answers = []
        result = await handle.run("What is the weather in Tokyo?")
        answers.append(result.final_answer)
        for question in ("And in Paris?", "Which of the two is warmer?"):
            result = await handle.run(question, session_id=result.session_id)
            answers.append(result.final_answer)
        assert answers == ["Tokyo: 21 °C", "Paris: 12 °C", "Tokyo"]
        sent = [json.dumps(r["messages"], ensure_ascii=False) for r in stub.requests[first:]]
        assert len(sent) == 5
        for earlier, later in itertools.pairwise(sent):
            assert later.startswith(earlier[:-1]), "a request must extend the one before it"
        session = await handle.session(result.session_id)
        assert [(t.question, t.status, t.first_step) for t in session.turns] == [
            ("What is the weather in Tokyo?", "completed", 0),
            ("And in Paris?", "completed", 2), ("Which of the two is warmer?", "completed", 4)]
        assert (result.turn, [s.index for s in result.steps]) == (3, [5])
        assert session.usage.total_tokens == sum(
            s.usage.total_tokens or 0 for s in session.steps) != result.usage.total_tokens
        return result

    async with StubServer(reply) as stub:
        setup = Setup(model=lambda: OpenAICompatibleModel(
            base_url=stub.base_url, model="m", tool_mode="react"), tools=lambda: [weather])
        got = await across(drivers, tmp_path, setup, converse)
    assert got.observations == ["Tokyo: 21 °C", "Paris: 12 °C"]
    assert got.transitions == [("running", "completed"), ("completed", "running"),
                               ("running", "completed"), ("completed", "running"),
                               ("running", "completed")]


async def test_a_turn_is_refused_while_calls_wait_for_a_person(drivers: list[Driver],
                                                               tmp_path: Path) -> None:
    async def act(handle: Handle) -> RunResult:
        waiting = await handle.run("Send 500 to Bob")
        assert waiting.status == "awaiting_approval"
        with pytest.raises(TurnRefused, match="waiting for approval"):
            await handle.run("And 20 to Ann?", session_id=waiting.session_id)
        await handle.decide(waiting.session_id, True)
        return await handle.resume(waiting.session_id)

    setup = Setup(model=lambda: ScriptedModel([
        react("pay", "transfer", {"to": "Bob", "amount": 500}), "Final Answer: sent"]),
        tools=lambda: [transfer])
    got = await across(drivers, tmp_path, setup, act)
    assert (got.status, got.observations) == ("completed", ["sent 500 to Bob"])


async def test_a_fork_at_a_step_goes_its_own_way(drivers: list[Driver], tmp_path: Path) -> None:
    """Forked after step 1 of 3, a session asks the model what the parent asked at step 2 (the
    same history), answers, takes another question; the parent is as it was."""
    async def act(handle: Handle) -> RunResult:
        parent = await handle.run("What is 2+3, plus 1?")
        assert (parent.status, parent.final_answer, len(parent.steps)) == ("completed", "6", 3)
        before = (await handle.session(parent.session_id)).to_dict()
        with pytest.raises(UserError, match=r"has 3 step.* from 0 to 3, not 4"):
            await handle.fork(parent.session_id, 4)
        child_id = await handle.fork(parent.session_id, 1)
        child = await handle.session(child_id)
        assert child_id != parent.session_id and child.steps[0].index == 1
        assert child.forked_from == ForkedFrom(session_id=parent.session_id, step=1)
        resumed = await handle.resume(child_id)
        assert (resumed.status, resumed.final_answer, [s.index for s in resumed.steps]) == (
            "completed", "5, then", [1, 2])
        sent = handle.agent.model.requests  # type: ignore[union-attr]
        assert sent[3].messages == sent[1].messages  # step 2's request, again
        result = await handle.run("Now double it", session_id=child_id)
        assert sent[4].messages[:len(sent[3].messages)] == sent[3].messages
        assert (await handle.session(parent.session_id)).to_dict() == before
        return result

    setup = Setup(model=lambda: ScriptedModel([
        react("add", "add", {"a": 2, "b": 3}), react("plus one", "add", {"a": 5, "b": 1}),
        "Final Answer: 6", "Final Answer: 5, then", "Final Answer: 10"]), tools=lambda: [add])
    got = await across(drivers, tmp_path, setup, act)
    assert (got.status, got.final_answer, got.observations) == ("completed", "10", ["5"])
    assert got.transitions == [("completed", "running"), ("running", "completed"),
                               ("completed", "running"), ("running", "completed")]


async def test_memories_are_recalled_before_each_turn(drivers: list[Driver],
                                                      tmp_path: Path) -> None:
    """The recall before a turn is a call through the driver (an activity on Temporal); the
    model sees the block with the question, and a later turn keeps the earlier block as sent."""
    from miniagent import Memory

    memory = Memory(tmp_path / "memory.db")
    memory.add("Alice's favourite tea is 龙井.", namespace="alice")
    memory.add("Alice lives in 杭州.", namespace="alice")

    def reply(request: dict[str, Any], _n: int) -> str:
        last = request["messages"][-1]["content"]
        if "not instructions" not in last:
            return "Final Answer: I do not know"
        return "Final Answer: 龙井" if "tea" in last.rsplit("\n\n", 1)[-1] else "Final Answer: 杭州"

    async def converse(handle: Handle) -> RunResult:
        first = len(stub.requests)
        tea = await handle.run("Which tea does Alice like?")
        home = await handle.run("Where does Alice live? 她住在哪里？", session_id=tea.session_id)
        assert (tea.final_answer, home.final_answer) == ("龙井", "杭州")
        one, two = (json.dumps(r["messages"], ensure_ascii=False)
                    for r in stub.requests[first:])
        assert two.startswith(one[:-1])
        session = await handle.session(home.session_id)
        assert ["Alice lives in 杭州." in (t.recalled or "") for t in session.turns] == [
            True, True]
        return home

    async with StubServer(reply) as stub:
        setup = Setup(model=lambda: OpenAICompatibleModel(
            base_url=stub.base_url, model="m", tool_mode="react"),
            options={"memory": MemorySettings(memory=memory, namespace="alice")})
        got = await across(drivers, tmp_path, setup, converse)
    assert got.events.count("memory_recalled") == 2


async def test_an_mcp_tool(drivers: list[Driver], tmp_path: Path) -> None:
    from miniagent.mcp import MCPServer

    args = {"source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    setup = Setup(model=lambda: ScriptedModel(
        [react("convert", "time_convert_time", args), "Final Answer: 20:00 in Tokyo"]),
        tools=lambda: [MCPServer.stdio(sys.executable, args=["-m", "mcp_server_time"],
                                       prefix="time")])
    got = await across(drivers, tmp_path, setup, run("noon in Paris, in Tokyo?"))
    assert got.status == "completed" and "20:00:00+09:00" in got.observations[0]


# -- a protocol and a tool source of the test's own: no driver code knows them ---------------

class PipeProtocol:
    """Calls as ``CALL name | {json}``, answers as ``ANSWER text``."""

    name = "pipe"

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        names = ", ".join(t.name for t in tools)
        wire = [{"role": "system", "content": f"Reply CALL name | json, or ANSWER. ({names})"}]
        for m in messages:
            if m.role == "tool":
                wire.append({"role": "user", "content": f"RESULT {m.content}"})
            else:
                wire.append({"role": m.role, "content": m.content or ""})
        return ModelRequest(messages=wire, protocol=self.name)

    def parse(self, response: ModelResponse, request: ModelRequest) -> ParsedOutput:
        text = (response.content or "").strip()
        if text.startswith("ANSWER "):
            return ParsedOutput(kind="final", final_answer=text[7:], text=text)
        if text.startswith("CALL ") and " | " in text:
            name, raw = text[5:].split(" | ", 1)
            return ParsedOutput(kind="action", text=text, tool_calls=[
                ToolCall(id="", name=name.strip(), arguments=json.loads(raw), raw_arguments=raw)])
        return ParsedOutput(kind="invalid", error="neither CALL nor ANSWER", text=text)

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        return f"Bad reply ({error}): write CALL name | json, or ANSWER text."

    def recover(self, error: Exception, request: ModelRequest, messages: Sequence[Message],
                tools: Sequence[ToolLike], instructions: str | None = None) -> None:
        return None


class Glossary:
    """A tool source of the test's own: one tool, answered from a dict."""

    def __init__(self) -> None:
        self.tool = Tool.from_schema(
            name="define", description="Define a word.", fn=lambda args: "unused",
            parameters={"type": "object", "properties": {"word": {"type": "string"}},
                        "required": ["word"]})

    async def list_tools(self) -> list[Tool]:
        return [self.tool]

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        meaning = {"ephemeral": "lasting a very short time"}.get(call.arguments["word"], "?")
        where = context.session_id if context is not None else "nowhere"
        return Observation(call_id=call.id, tool_name=call.name,
                           output=f"{meaning} (asked in {len(where) > 0})")

    async def aclose(self) -> None:
        pass


register_protocol("pipe", PipeProtocol)


async def test_a_custom_protocol_and_a_custom_tool_source(drivers: list[Driver],
                                                          tmp_path: Path) -> None:
    setup = Setup(model=lambda: ScriptedModel(
        ['CALL define | {"word": "ephemeral"}', "ANSWER short-lived"]),
        tools=lambda: [Glossary()], options={"protocol": PipeProtocol()})
    got = await across(drivers, tmp_path, setup, run("what is ephemeral?"))
    assert (got.status, got.final_answer) == ("completed", "short-lived")
    assert got.observations == ["lasting a very short time (asked in True)"]


async def test_a_stream_yields_the_run_s_events_and_ends_with_its_result(
        drivers: list[Driver], tmp_path: Path) -> None:
    async def act(handle: Handle) -> RunResult:
        streamed = await handle.stream("What is 2+3?")
        last = streamed[-1]
        assert isinstance(last, ev.RunFinished)
        mine = [e.kind for e in handle.events if e.session_id == last.session_id]
        assert [e.kind for e in streamed] == mine  # what on_event subscribers got
        return last.result

    reference = await across(drivers, tmp_path, Setup(
        model=lambda: ScriptedModel([react("add them", "add", {"a": 2, "b": 3}),
                                     "Thought: done\nFinal Answer: 5"]),
        tools=lambda: [add]), act)
    assert (reference.status, reference.final_answer) == ("completed", "5")
    assert reference.events[0] == "run_started" and reference.events[-1] == "run_finished"
    assert reference.observations == ["5"]


async def test_a_call_with_ungrounded_figures(drivers: list[Driver], tmp_path: Path) -> None:
    """With ``ground_figures`` a call whose figure nothing gave is not run, once: the model is
    asked to fetch it, and the same figures again are let through, on every driver (the spec
    carries the aid to a Temporal worker; a replay decides the same from the recorded
    moves)."""
    setup = Setup(model=lambda: ScriptedModel([
        react("add them", "add", {"a": 2, "b": 37}), react("add them", "add", {"a": 2, "b": 37}),
        "Final Answer: 39"]), tools=lambda: [add], options={"aids": Aids(ground_figures=True)})
    got = await across(drivers, tmp_path, setup, run("What is 2 plus the year's count?"))
    assert (got.status, got.final_answer) == ("completed", "39")
    refused, ran = got.observations
    assert refused.startswith("The call of 'add' was not run: the figure 37 appears")
    assert ran == "39"
    assert [outcome for _, _, outcome in got.calls] == [
        ["completed"], ["started", "completed"]]
    assert "guard_intervened" in got.events


async def test_the_restated_question(drivers: list[Driver], tmp_path: Path) -> None:
    """With ``restate_question`` the result a model sees ends with the question, on every
    driver (the spec carries the aid to a Temporal worker)."""
    seen: list[ModelRequest] = []

    class Recording(ScriptedModel):
        async def generate(self, request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return await super().generate(request)

    setup = Setup(model=lambda: Recording(
        [react("look", "weather", {"city": "Oslo"}), "Final Answer: sunny"]),
        tools=lambda: [aided_weather], options={"aids": Aids(restate_question=True)})
    got = await across(drivers, tmp_path, setup, run("Is it sunny in Oslo?"))
    assert (got.status, got.final_answer) == ("completed", "sunny")
    answers = seen[1::2]
    assert len(answers) == len(drivers)
    for request in answers:
        assert request.messages[-1]["content"].startswith(
            "Observation: Oslo: sunny, 18 °C\n[The question: Is it sunny in Oslo?\n")

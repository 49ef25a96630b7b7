"""The loop driven by ScriptedModel: statuses, history, guards, events."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from miniagent import Agent, Event, Limits, ModelSettings, ScriptedModel, ToolsNotSupported, tool
from miniagent.core.errors import ModelConnectionError
from tool_calls import execute


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper() * 50


@tool
async def slow(seconds: float) -> str:
    """Sleep, then say done."""
    await asyncio.sleep(seconds)
    return "done"


def act(name: str, args: dict[str, object], thought: str = "use a tool") -> str:
    return f"Thought: {thought}\nAction: {name}\nAction Input: {json.dumps(args)}"


def native_call(name: str, args: dict[str, object], call_id: str = "c1") -> dict[str, object]:
    return {
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)}}],
    }


async def test_react_run_completes_and_feeds_observation_back() -> None:
    model = ScriptedModel([act("add", {"a": 2, "b": 3}), "Thought: known\nFinal Answer: 5"])
    result = await Agent(model=model, tools=[add]).arun("What is 2+3?")
    assert (result.status, result.final_answer) == ("completed", "5")
    assert len(result.steps) == 2
    assert result.steps[0].observations[0].output == "5"
    second = model.requests[1]
    assert second.messages[-1] == {"role": "user", "content": "Observation: 5"}
    assert second.stop and any("Observation" in s for s in second.stop)
    assert second.tools is None


async def test_native_run_sends_tool_messages_with_call_ids() -> None:
    model = ScriptedModel(
        [native_call("add", {"a": 2, "b": 3}, "call_x"), {"content": "It is 5."}],
        tool_mode="native",
    )
    result = await Agent(model=model, tools=[add]).arun("What is 2+3?")
    assert (result.status, result.final_answer) == ("completed", "It is 5.")
    first, second = model.requests
    assert first.tools and first.tools[0]["function"]["name"] == "add"
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_x", "content": "5"}
    assert second.messages[-2]["tool_calls"][0]["id"] == "call_x"


async def test_history_is_append_only_across_steps() -> None:
    model = ScriptedModel([
        act("add", {"a": 1, "b": 1}), "no format at all", act("add", {"a": 2, "b": 2}),
        "Final Answer: 4",
    ])
    result = await Agent(model=model, tools=[add]).arun("q")
    assert result.status == "completed"
    rendered = [json.dumps(r.messages, ensure_ascii=False) for r in model.requests]
    flat = ["".join(f"<|{m['role']}|>{m['content']}" for m in r.messages) for r in model.requests]
    for shorter, longer in itertools.pairwise(flat):
        assert longer.startswith(shorter) and len(longer) > len(shorter)
    for earlier, later in itertools.pairwise(model.requests):
        assert later.messages[: len(earlier.messages)] == earlier.messages
    assert len(set(rendered)) == 4


async def test_format_error_becomes_observation_with_the_format() -> None:
    model = ScriptedModel(["I think the answer is five.", "Final Answer: 5"])
    result = await Agent(model=model, tools=[add]).arun("q")
    assert result.status == "completed"
    assert result.steps[0].error
    note = model.requests[1].messages[-1]
    assert note["role"] == "user"
    assert "Action Input:" in note["content"] and "add" in note["content"]


async def test_max_steps_status() -> None:
    """At the limit one last request (no tools) asks for an answer; an action is none."""
    model = ScriptedModel([act("add", {"a": i, "b": 1}) for i in range(5)])
    result = await Agent(model=model, tools=[add], limits=Limits(max_steps=3)).arun("q")
    assert (result.status, result.reason) == ("max_steps", "no final answer after max_steps=3")
    assert (result.final_answer, result.answered_at_limit) == (None, False)
    assert len(model.requests) == 4
    assert "Tools: none." in model.requests[3].messages[0]["content"]
    assert sum(o.output.isdigit() for s in result.steps for o in s.observations) == 3


async def test_token_budget_stops_before_next_call() -> None:
    from miniagent import ModelResponse, TokenUsage

    heavy = ModelResponse(content=act("add", {"a": 1, "b": 2}),
                          usage=TokenUsage(prompt_tokens=900, completion_tokens=200))
    model = ScriptedModel([heavy, "Final Answer: 3"])
    result = await Agent(model=model, tools=[add], limits=Limits(token_budget=1000)).arun("q")
    assert result.status == "budget_exceeded"
    assert result.usage.total_tokens == 1100
    assert len(model.requests) == 1


async def test_deadline_gives_timeout_status() -> None:
    model = ScriptedModel([act("slow", {"seconds": 5}), "Final Answer: x"])
    result = await Agent(model=model, tools=[slow], limits=Limits(timeout=0.2)).arun("q")
    assert result.status == "timeout"
    assert "deadline" in result.reason


async def test_repeated_action_intervention_then_loop_detected() -> None:
    same = act("add", {"a": 1, "b": 2})
    model = ScriptedModel([same, act("add", {"b": 2, "a": 1}), same, same, "Final Answer: 3"])
    result = await Agent(model=model, tools=[add],
                         limits=Limits(repeat_limit=3, answer_after_repeat=False)).arun("q")
    assert result.status == "loop_detected"
    third = result.steps[2].observations[0]
    assert third.is_error and "same arguments 3 times" in third.output
    assert len(model.requests) == 4


async def test_intervention_lets_a_model_recover() -> None:
    same = act("add", {"a": 1, "b": 2})
    model = ScriptedModel([same, same, same, "Final Answer: 3"])
    result = await Agent(model=model, tools=[add], limits=Limits(repeat_limit=3)).arun("q")
    assert (result.status, result.final_answer) == ("completed", "3")


async def test_long_observation_is_truncated_with_notice() -> None:
    model = ScriptedModel([act("shout", {"text": "abcdefghij"}), "Final Answer: ok"])
    result = await Agent(model=model, tools=[shout],
                         limits=Limits(max_observation_chars=100)).arun("q")
    output = result.steps[0].observations[0].output
    assert output.startswith("ABCDEFGHIJ")
    assert output.endswith("... [truncated 400 of 500 chars]")
    assert model.requests[1].messages[-1]["content"].endswith("[truncated 400 of 500 chars]")


async def test_transport_failure_ends_with_error_status() -> None:
    model = ScriptedModel([ModelConnectionError("connection refused")])
    result = await Agent(model=model, tools=[add]).arun("q")
    assert result.status == "error"
    assert "connection refused" in result.reason


async def test_script_exhausted_is_an_error_not_a_crash() -> None:
    result = await Agent(model=ScriptedModel([]), tools=[add]).arun("q")
    assert result.status == "error" and "no output left" in result.reason


async def test_auto_mode_falls_back_to_react_when_tools_rejected() -> None:
    rejected = ToolsNotSupported("tools are not supported", status=400)
    model = ScriptedModel([rejected, act("add", {"a": 2, "b": 2}), "Final Answer: 4"],
                          tool_mode="auto")
    result = await Agent(model=model, tools=[add]).arun("q")
    assert (result.status, result.final_answer) == ("completed", "4")
    assert model.requests[0].tools and model.requests[1].tools is None
    assert model.requests[1].stop


async def test_unknown_tool_and_parallel_native_calls_keep_order() -> None:
    calls = {
        "content": "two at once",
        "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
            {"id": "b", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}},
        ],
    }
    model = ScriptedModel([calls, {"content": "done"}], tool_mode="native")
    result = await Agent(model=model, tools=[add]).arun("q")
    assert result.status == "completed"
    first, second = result.steps[0].observations
    assert (first.call_id, first.output, first.is_error) == ("a", "3", False)
    assert second.call_id == "b" and second.is_error and "add" in second.output


async def test_events_reach_subscribers_and_a_failing_subscriber_is_harmless() -> None:
    seen: list[str] = []

    def broken(event: Event) -> None:
        raise RuntimeError("display bug")

    agent = Agent(model=ScriptedModel([act("add", {"a": 1, "b": 1}), "Final Answer: 2"]),
                  tools=[add])
    agent.subscribe(broken)
    agent.subscribe(lambda e: seen.append(e.kind))
    result = await agent.arun("q")
    assert result.status == "completed"
    assert seen == ["run_started", "step_started", "model_started", "model_responded",
                    "tool_started", "tool_finished", "step_finished", "step_started",
                    "model_started", "model_responded", "step_finished", "run_finished"]


def test_sync_run_wraps_arun() -> None:
    model = ScriptedModel(["Final Answer: hi 你好"])
    result = Agent(model=model).run("say hi")
    assert result.final_answer == "hi 你好"
    assert result.session_id


async def test_sync_run_inside_event_loop_is_refused() -> None:
    from miniagent import UserError

    with pytest.raises(UserError, match="arun"):
        Agent(model=ScriptedModel([])).run("q")


def test_a_hung_sync_tool_does_not_hold_up_run() -> None:
    import threading

    release, finished = threading.Event(), threading.Event()

    @tool(timeout=0.2)
    def hang() -> str:
        """Never returns until released."""
        release.wait(10)
        finished.set()
        return "late"

    model = ScriptedModel([act("hang", {}), "Final Answer: gave up"])
    result = Agent(model=model, tools=[hang]).run("q")
    still_hanging = not finished.is_set()
    release.set()
    assert (result.status, result.final_answer) == ("completed", "gave up")
    assert "timed out after 0.2 s" in result.steps[0].observations[0].output
    assert still_hanging  # run() returned while the tool's thread was still blocked


async def test_react_requests_carry_the_tools_grammar_unless_turned_off() -> None:
    model = ScriptedModel(["Final Answer: 1", "Final Answer: 2"], grammar=True)
    await Agent(model=model, tools=[add]).arun("q")
    grammar = model.requests[0].grammar
    assert grammar and 'add-args ::=' in grammar and '"Final Answer: "' in grammar
    await Agent(model=model, tools=[add], model_settings=ModelSettings(grammar=False)).arun("q")
    assert model.requests[1].grammar is None
    native = ScriptedModel([{"content": "hi"}], tool_mode="native")
    await Agent(model=native, tools=[add]).arun("q")
    assert native.requests[0].grammar is None


async def test_per_run_subscribers_see_only_their_run() -> None:
    agent = Agent(model=ScriptedModel(["Final Answer: a", "Final Answer: b"]))
    everything: list[str] = []
    agent.subscribe(lambda e: everything.append(e.session_id))
    mine: list[Event] = []
    first = await agent.arun("q1", on_event=mine.append)
    second = await agent.arun("q2")
    assert {e.session_id for e in mine} == {first.session_id}
    assert mine[-1].kind == "run_finished"
    assert set(everything) == {first.session_id, second.session_id}


async def test_a_blocked_subscriber_does_not_stall_the_run() -> None:
    import threading

    release = threading.Event()
    delivered: list[str] = []

    def blocked(event: Event) -> None:
        release.wait(10)
        delivered.append(event.kind)

    model = ScriptedModel([act("add", {"a": 1, "b": 1}), "Final Answer: 2"])
    agent = Agent(model=model, tools=[add])
    agent.subscribe(blocked)
    agent.bus.flush_timeout = 0.05
    result = await agent.arun("q")
    assert (result.status, result.final_answer) == ("completed", "2")
    assert delivered == []  # the run finished while the subscriber was still stuck
    release.set()
    for _ in range(200):  # bounded: the events arrive, in order, once it is unstuck
        if delivered and delivered[-1] == "run_finished":
            break
        await asyncio.sleep(0.01)
    assert delivered[0] == "run_started" and delivered[-1] == "run_finished"


async def test_auto_protocol_remembers_success_and_refusal() -> None:
    from miniagent.core.protocol.auto import AutoProtocol

    rejected = ToolsNotSupported("tools are not supported", status=400)
    model = ScriptedModel([rejected, "Final Answer: 1", "Final Answer: 2"], tool_mode="auto")
    agent = Agent(model=model, tools=[add])
    assert isinstance(agent.protocol, AutoProtocol) and agent.protocol.native_tools is None
    await agent.arun("q1")
    await agent.arun("q2")
    assert agent.protocol.native_tools is False
    assert [bool(r.tools) for r in model.requests] == [True, False, False]
    # once tools worked, a later refusal is an error, not a fallback
    ok = ScriptedModel([{"content": "hi"}, rejected], tool_mode="auto")
    trusting = Agent(model=ok, tools=[add])
    assert (await trusting.arun("q")).status == "completed"
    failed = await trusting.arun("q")
    assert failed.status == "error" and "tools are not supported" in failed.reason


async def test_a_custom_protocol_plugs_in_without_touching_the_loop() -> None:
    from miniagent.core.protocol.react import ReactProtocol
    from miniagent.core.types import ModelRequest, ModelResponse, ParsedOutput

    class Shouting(ReactProtocol):
        name = "shouting"

        def parse(self, response: ModelResponse, request: ModelRequest | None = None
                  ) -> ParsedOutput:
            parsed = super().parse(response, request)
            if parsed.final_answer:
                parsed.final_answer = parsed.final_answer.upper()
            return parsed

    agent = Agent(model=ScriptedModel(["Final Answer: hi"]), protocol=Shouting())
    assert (await agent.arun("q")).final_answer == "HI"


async def test_tools_from_another_source_are_listed_once_per_run_and_obey_approval() -> None:
    from collections.abc import Sequence

    from miniagent import Observation, Tool, ToolCall, ToolRegistry

    @tool(requires_approval=lambda args: args["n"] > 9)
    def remote(n: int) -> str:
        """A tool another source offers."""
        return f"remote {n}"

    class Source:
        def __init__(self) -> None:
            self.listed = 0
            self.closed = 0
            self.registry = ToolRegistry([remote])

        async def list_tools(self) -> Sequence[Tool]:
            self.listed += 1
            return await self.registry.list_tools()

        async def call_tool(self, call: ToolCall, context: object = None) -> Observation:
            return await execute(self.registry, call)

        async def aclose(self) -> None:
            self.closed += 1

    source = Source()
    script = [act("remote", {"n": 1}), act("add", {"a": 1, "b": 2}), "Final Answer: ok",
              act("remote", {"n": 10})]
    agent = Agent(model=ScriptedModel(script), tools=[add, source])
    result = await agent.arun("q")
    assert result.status == "completed" and source.listed == 1
    assert [o.output for s in result.steps for o in s.observations] == ["remote 1", "3"]
    waiting = await agent.arun("q2")
    assert waiting.status == "awaiting_approval" and source.listed == 2
    assert "remote" in agent.model.requests[0].messages[0]["content"]  # type: ignore[attr-defined]
    await agent.aclose()
    assert source.closed == 1


def test_an_approver_that_raises_leaves_the_call_waiting(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def pay(n: int) -> str:
        """Pay."""
        ran.append(n)
        return "paid"

    def broken(pending: object) -> bool:
        raise RuntimeError("terminal gone")

    agent = Agent(model=ScriptedModel([act("pay", {"n": 5})]), tools=[pay], approver=broken)
    result = agent.run("q")
    assert result.status == "awaiting_approval" and ran == []
    assert "the approver failed" in caplog.text


async def test_a_subscriber_raising_system_exit_does_not_stop_delivery() -> None:
    seen: list[str] = []

    def exits(event: Event) -> None:
        raise SystemExit(1)

    agent = Agent(model=ScriptedModel(["Final Answer: a", "Final Answer: b"]))
    agent.subscribe(exits)
    agent.subscribe(lambda e: seen.append(e.kind))
    await agent.arun("q1")
    await agent.arun("q2")
    assert seen.count("run_finished") == 2


def test_what_a_driver_cannot_use_is_refused_not_dropped() -> None:
    from miniagent import InMemoryStore
    from miniagent.core.errors import UserError
    from miniagent.temporal import TemporalAgent

    with pytest.raises(UserError, match="on Temporal keeps its sessions in the workflows"):
        TemporalAgent(Agent(model=ScriptedModel([]), store=InMemoryStore()), object())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="needs a model"):
        Agent().run("q")

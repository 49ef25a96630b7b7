"""Tool slots and nested calls: no call waits for a slot that only its own caller could free.

Slots belong to a tool's definition, not its name, so a sub-agent's tool never waits for the
agent tool that called it because the two share a name. An agent tool's depth is judged before
its call waits for a slot, and a call made inside a call of its own tool is refused, however
many slots are free: calls that hold every slot between them would otherwise each wait for the
other's. Each run has a timeout, so a regression ends the run (as a failed assertion) instead
of hanging the test.
"""

from __future__ import annotations

import json
from typing import Any

from miniagent import Agent, Limits, ScriptedModel, ToolRule, WithRules, tool
from miniagent.core.types import ModelRequest

LIMIT_ONE = {"*": ToolRule(max_concurrency=1)}


def act(name: str, args: dict[str, Any]) -> str:
    return f"Thought: delegate\nAction: {name}\nAction Input: {json.dumps(args)}"


def answer_with_observation(request: ModelRequest) -> str:
    seen = str(request.messages[-1]["content"]).removeprefix("Observation: ")
    return f"Final Answer: {seen}"


async def test_a_sub_agent_tool_sharing_the_agent_tools_name_does_not_wait_for_it() -> None:
    @tool(name="research", max_concurrency=1)
    def research(topic: str) -> str:
        """Look a topic up."""
        return f"notes on {topic}"

    inner = Agent(model=ScriptedModel([act("research", {"topic": "owls"}),
                                       answer_with_observation]), tools=[research])
    delegate = WithRules(inner.as_tool(name="research", description="Researches."), LIMIT_ONE)
    outer = Agent(model=ScriptedModel([act("research", {"question": "owls?"}),
                                       answer_with_observation]),
                  tools=[delegate], limits=Limits(timeout=5))
    result = await outer.arun("Tell me about owls.")
    assert (result.status, result.final_answer) == ("completed", "notes on owls")


async def test_an_agent_offered_to_itself_is_refused_by_depth_before_waiting_for_a_slot() -> None:
    model = ScriptedModel([act("myself", {"question": "again"})] * 2
                          + [answer_with_observation] * 2)
    agent = Agent(model=model, limits=Limits(timeout=5))
    agent.sources.append(WithRules(agent.as_tool(name="myself", description="Me.", max_depth=1),
                                   LIMIT_ONE))
    result = await agent.arun("q")
    assert result.status == "completed"
    assert "may nest at most 1 deep, and this call would run at depth 2" in (
        result.final_answer or "")
    sub = result.steps[0].observations[0].sub_run
    assert sub is not None and sub.status == "completed" and sub.depth == 1
    assert len(model.requests) == 4


async def test_a_call_inside_its_own_only_slot_is_refused_not_left_waiting() -> None:
    """Deep enough for the depth rule (3), but the caller holds the one slot: refused."""
    model = ScriptedModel([act("myself", {"question": "again"})] * 2
                          + [answer_with_observation] * 2)
    agent = Agent(model=model, limits=Limits(timeout=5))
    agent.sources.append(WithRules(agent.as_tool(name="myself", description="Me."), LIMIT_ONE))
    result = await agent.arun("q")
    assert result.status == "completed"
    assert "is called from inside a call of itself" in (result.final_answer or "")
    assert len(model.requests) == 4


async def test_a_nested_call_is_refused_even_while_a_second_slot_is_free() -> None:
    """A free slot now may be taken by another session's call a moment later: a nested call
    never waits on its own tool, so it is refused whatever the count."""
    model = ScriptedModel([act("myself", {"question": "again"})] * 2
                          + [answer_with_observation] * 2)
    agent = Agent(model=model, limits=Limits(timeout=5))
    agent.sources.append(WithRules(agent.as_tool(name="myself", description="Me.", max_depth=2),
                                   {"*": ToolRule(max_concurrency=2)}))
    result = await agent.arun("q")
    assert result.status == "completed"
    assert "is called from inside a call of itself" in (result.final_answer or "")
    assert len(model.requests) == 4


def _two_delegations_each_calling_itself(request: ModelRequest) -> dict[str, Any]:
    """The top run calls ``myself`` twice at once; each sub-run calls it once more."""
    question = next(m["content"] for m in request.messages if m["role"] == "user")
    seen = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
    if seen:
        return {"content": " | ".join(seen)}
    asks = {"top": ["a", "b"], "a": ["again"], "b": ["again"]}.get(question, [])
    if not asks:
        return {"content": "deep"}
    return {"content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "myself", "arguments": json.dumps({"question": ask})}}
        for i, ask in enumerate(asks)]}


async def test_parallel_calls_each_holding_a_slot_do_not_wait_for_each_other_nested() -> None:
    """Two slots, two calls at once: each holds one, and each one's nested call of the same
    tool is refused at once (it would wait for a slot only the other could free: forever)."""
    model = ScriptedModel([_two_delegations_each_calling_itself] * 8, tool_mode="native")
    agent = Agent(model=model, limits=Limits(timeout=10, tool_concurrency=2))
    agent.sources.append(WithRules(agent.as_tool(name="myself", description="Me."),
                                   {"*": ToolRule(max_concurrency=2)}))
    result = await agent.arun("top")
    assert result.status == "completed"
    refusal = "is called from inside a call of itself"
    assert (result.final_answer or "").count(refusal) == 2
    assert "deep" not in (result.final_answer or "")

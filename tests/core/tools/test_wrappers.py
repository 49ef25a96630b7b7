"""Rules that stack on any tool source, and the one executor that dispatches each call to the
source that listed its tool."""

from __future__ import annotations

from typing import Any

import pytest

from miniagent import (
    Agent,
    Filtered,
    Observation,
    Prefixed,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolRegistry,
    ToolRule,
    WithRules,
    tool,
)
from miniagent.core.errors import ConfigError, ToolDefinitionError
from miniagent.core.tools.toolbox import Toolbox


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"read {path}"


@tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def move(path: str, to: str) -> str:
    """Move a file."""
    return f"moved {path} to {to}"


class Counting:
    """A source of its own that counts what reaches it (it runs nothing else)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []
        self.tool = Tool.from_schema(
            name="ping", description="Ping a host.", fn=lambda args: "never used",
            parameters={"type": "object", "properties": {"host": {"type": "string"},
                                                         "count": {"type": "integer",
                                                                   "default": 1}},
                        "required": ["host"]})

    async def list_tools(self) -> list[Tool]:
        return [self.tool]

    async def call_tool(self, call: ToolCall, context: ToolContext | None = None
                        ) -> Observation:
        self.calls.append((call.name, call.arguments,
                           context.idempotency_key if context else None))
        return Observation(call_id=call.id, tool_name=call.name,
                           output=f"pong {call.arguments['host']} x{call.arguments['count']}")

    async def aclose(self) -> None:
        pass


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


async def test_rules_stack_on_a_function_source() -> None:
    files = ToolRegistry([read, delete, move])
    source = Prefixed(Filtered(WithRules(files, {"delete": ToolRule(requires_approval=True)}),
                               deny=["move"]), "fs")
    toolbox = await Toolbox.gather([source])
    assert toolbox.names == ["fs_read", "fs_delete"]
    assert toolbox.needs_approval(call("fs_delete", path="a"))
    assert not toolbox.needs_approval(call("fs_read", path="a"))
    observation = await toolbox.execute(call("fs_read", path="a.txt"))
    assert (observation.output, observation.tool_name) == ("read a.txt", "fs_read")
    unknown = await toolbox.execute(call("fs_move", path="a", to="b"))
    assert unknown.is_error and "Available tools: fs_read, fs_delete" in unknown.output


async def test_each_call_goes_to_the_source_that_listed_it_validated() -> None:
    counting = Counting()
    toolbox = await Toolbox.gather([ToolRegistry([read]), Prefixed(counting, "net")])
    context = ToolContext.for_call("s1", "c1", "net_ping", 1)
    observation = await toolbox.execute(
        ToolCall(id="c1", name="net_ping", arguments={"host": "a", "count": "3"}), context)
    assert observation.output == "pong a x3"
    # the source got the inner name, the coerced arguments and the call's context
    assert counting.calls == [("ping", {"host": "a", "count": 3}, "s1:c1")]
    bad = await toolbox.execute(ToolCall(id="c2", name="net_ping", arguments={"count": 2}))
    assert bad.is_error and "host" in bad.output and len(counting.calls) == 1
    defaulted = await toolbox.execute(call("net_ping", host="b"))
    assert defaulted.output == "pong b x1"


async def test_rules_apply_to_an_agent_used_as_a_tool() -> None:
    helper = Agent(model=ScriptedModel(["Final Answer: 42"]))
    source = WithRules(helper.as_tool(name="ask", description="Knows things."),
                       {"ask": ToolRule(requires_approval=lambda args: "secret" in
                                        args["question"], timeout=9.0)})
    toolbox = await Toolbox.gather([source])
    assert toolbox.timeout_of("ask") == 9.0
    assert toolbox.needs_approval(call("ask", question="the secret"))
    assert not toolbox.needs_approval(call("ask", question="the time"))
    observation = await toolbox.execute(call("ask", question="6 x 7?"),
                                        ToolContext.for_call("parent", "c9", "ask", 1))
    assert observation.output == "42" and observation.sub_run is not None


async def test_two_sources_may_not_offer_the_same_name() -> None:
    with pytest.raises(ToolDefinitionError, match="two tools are named 'read'"):
        await Toolbox.gather([ToolRegistry([read]), ToolRegistry([read])])
    toolbox = await Toolbox.gather([ToolRegistry([read]), Prefixed(ToolRegistry([read]), "b")])
    assert toolbox.names == ["read", "b_read"]


def test_a_bad_prefix_or_rule_is_refused_when_defined() -> None:
    with pytest.raises(ConfigError, match="may only hold letters"):
        Prefixed(ToolRegistry([read]), "no spaces")
    with pytest.raises(ConfigError, match="must be a positive number of seconds"):
        ToolRule(timeout=0)


async def test_an_agent_runs_wrapped_sources() -> None:
    counting = Counting()
    model = ScriptedModel(['Action: net_ping\nAction Input: {"host": "h"}', "Final Answer: up"])
    result = await Agent(model=model, tools=[Prefixed(counting, "net")]).arun("is h up?")
    assert (result.status, result.steps[0].observations[0].output) == ("completed", "pong h x1")
    assert counting.calls[0][2] == f"{result.session_id}:{result.steps[0].calls[0].call.id}"

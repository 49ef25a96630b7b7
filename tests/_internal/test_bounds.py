"""Numbers that would switch a limit off are refused when the agent, its limits, a retry
policy or a tool is defined (issue 33, point 4): ``NaN``, infinity, negatives, fractions where
a count is meant, a retry policy of 10**9 tries, an inline tool with a timeout it cannot keep."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from miniagent import (
    Agent,
    Aids,
    Compression,
    ModelSettings,
    RetryPolicy,
    ScriptedModel,
    Tool,
    ToolRegistry,
    ToolRule,
    WithRules,
    tool,
)
from miniagent.core.errors import ConfigError, ToolDefinitionError, UserError
from miniagent.core.runtime.guards import Limits
from miniagent.core.runtime.run import AgentSpec

NAN, INF = float("nan"), float("inf")

AGENT_NUMBERS: dict[str, list[Any]] = {
    "max_steps": [NAN, INF, -1, 0, 2.5],
    "token_budget": [NAN, INF, -1, 1e6],
    "timeout": [NAN, INF, -INF, -1, 0],
    "max_observation_chars": [NAN, -1],
    "repeat_limit": [NAN, -1],
    "max_calls_per_step": [NAN, 0],
    "tool_concurrency": [NAN, INF, 0],
    "answer_after_results": [NAN, -1],
    "tool_selection": [NAN, -1],
    "max_tokens": [NAN, 0],
    "temperature": [NAN, INF, -0.5],
    "approval_timeout": [NAN, INF, 0],
    "warmup_timeout": [NAN, INF, 0],
}


def agent_with(label: str, value: Any) -> Any:
    """The agent given ``value`` for the setting ``label``, in the value that holds it."""
    if label == "warmup_timeout":
        return Agent(model=ScriptedModel([])).warm_up(timeout=value)
    holder: Any = {"tool_selection": Aids, "max_tokens": ModelSettings,
                   "temperature": ModelSettings}.get(label, Limits)
    name = {Aids: "aids", ModelSettings: "model_settings", Limits: "limits"}[holder]
    return Agent(model=ScriptedModel([]), **{name: holder(**{label: value})})


@pytest.mark.parametrize(("label", "value"), [
    (label, value) for label, values in AGENT_NUMBERS.items() for value in values])
def test_an_agent_refuses_a_number_that_cannot_bound_it(label: str, value: Any) -> None:
    with pytest.raises(UserError, match=f"^{label} must be") as caught:
        agent_with(label, value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize(("label", "value"), [
    ("max_steps", NAN), ("token_budget", NAN), ("timeout", NAN), ("timeout", INF),
    ("max_calls_per_step", 1.0), ("tool_concurrency", NAN), ("repeat_limit", -2)])
def test_limits_refuse_it_too_however_they_are_made(label: str, value: Any) -> None:
    with pytest.raises(UserError, match=f"^{label} must be"):
        Limits(**{label: value})
    with pytest.raises(UserError, match=f"^{label} must be"):
        AgentSpec().replace(limits={label: value})


def test_the_numbers_that_mean_something_are_kept() -> None:
    limits = Limits(max_steps=0, token_budget=0, timeout=0.5, repeat_limit=0,
                    max_observation_chars=0, answer_after_results=0)
    assert (limits.max_steps, limits.timeout, limits.repeat_limit) == (0, 0.5, 0)
    agent = Agent(model=ScriptedModel(["Final Answer: ok"]),
                  limits=Limits(max_steps=1, token_budget=100, timeout=30, approval_timeout=60),
                  model_settings=ModelSettings(temperature=0))
    assert agent.run("q").final_answer == "ok"


def test_a_nan_keep_last_is_refused() -> None:
    with pytest.raises(UserError, match=r"^keep_last must be at least 1, got nan"):
        Agent(model=ScriptedModel([]),
              compression=Compression(at=1000, keep_last=NAN))  # type: ignore[arg-type]


# -- retry policies -------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "field"), [
    ({"max_attempts": 10**9}, "max_attempts"),
    ({"max_attempts": 101}, "max_attempts"),
    ({"initial_delay": 10**9}, "initial_delay"),
    ({"max_delay": 3601.0}, "max_delay"),
    ({"initial_delay": -1.0}, "initial_delay"),
    ({"factor": INF}, "factor"),
    ({"max_delay": NAN}, "max_delay"),
])
def test_a_retry_policy_is_bounded(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolDefinitionError, match=f"^RetryPolicy {field} must be"):
        RetryPolicy(**settings)


def test_a_retry_bound_holds_wherever_a_policy_is_given() -> None:
    with pytest.raises(UserError, match="max_attempts must be from 1 to 100, got 1000000000"):
        Agent(model=ScriptedModel([]), tool_retry=10**9)
    with pytest.raises(ToolDefinitionError, match="max_attempts"):
        tool(retry=10**9)(lambda: 1)
    with pytest.raises(ConfigError, match="max_attempts"):
        ToolRule(retry=10**9)
    assert RetryPolicy(max_attempts=100, initial_delay=0, max_delay=3600).max_attempts == 100


# -- an inline tool cannot keep a timeout ---------------------------------------------------


def _quick(x: int) -> int:
    """Double a number."""
    return 2 * x


def test_inline_with_a_timeout_is_refused_everywhere_it_can_be_said() -> None:
    with pytest.raises(ToolDefinitionError, match=r"inline=True with timeout=0\.5"):
        tool(inline=True, timeout=0.5)(_quick)
    with pytest.raises(ToolDefinitionError, match="inline=True with timeout=1"):
        Tool.from_schema(name="echo", description="Echo.", parameters={"type": "object"},
                         fn=lambda args: args, inline=True, timeout=1)
    with pytest.raises(ToolDefinitionError, match="inline=True with timeout=2"):
        tool(timeout=2)(_quick).with_options(inline=True)
    with pytest.raises(ToolDefinitionError, match="inline=True with timeout=3"):
        tool(inline=True)(_quick).with_options(timeout=3, inline=True)
    with pytest.raises(ToolDefinitionError, match="Tool timeout must be a positive number"):
        tool(timeout=NAN)(_quick)


async def test_a_rule_cannot_give_an_inline_tool_a_timeout() -> None:
    @tool(inline=True)
    def here(x: int) -> int:
        """Double a number."""
        return 2 * x

    with pytest.raises(ToolDefinitionError, match=r"'here': inline=True with timeout=0\.2"):
        await WithRules(ToolRegistry([here]), {"*": ToolRule(timeout=0.2)}).list_tools()


async def test_an_inline_tool_wrapped_again_with_a_timeout_runs_where_the_timeout_fires() -> None:
    """``tool(timeout=...)`` on an inline tool makes a new tool, run on a worker thread: the
    run is told it timed out while the call still blocks (released afterwards)."""
    release = threading.Event()

    @tool(inline=True)
    def hold(key: str) -> str:
        """Hold until released."""
        release.wait(10)
        return "held"

    bounded = tool(timeout=0.2)(hold)
    assert (bounded.inline, bounded.timeout) == (False, 0.2)
    model = ScriptedModel(['Action: hold\nAction Input: {"key": "k"}', "Final Answer: done"])
    try:
        result = await Agent(model=model, tools=[bounded],
                             limits=Limits(timeout=30)).arun("hold it")
    finally:
        release.set()
    assert result.final_answer == "done"
    assert "timed out after 0.2 s" in result.steps[0].observations[0].output

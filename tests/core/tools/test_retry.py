"""A tool's retry policy: what the shared executor tries again, how long it waits, and when it
must not try again (a validation error, a non-idempotent tool's timeout, the deadline)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from miniagent import (
    Agent,
    RetryPolicy,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolRule,
    WithRules,
    tool,
    tool_context,
)
from miniagent.core.errors import ConfigError, ToolDefinitionError
from miniagent.core.runtime import events as ev
from tool_calls import toolbox_of

QUICK = RetryPolicy(max_attempts=3, initial_delay=0.001, jitter=False)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


def context(**changes: Any) -> ToolContext:
    base = ToolContext.for_call("s1", "c1", "t", 1)
    return ToolContext(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, **changes})


def flaky(failures: int, *, idempotent: bool = False, retry: Any = QUICK,
          error: BaseException | None = None) -> tuple[Tool, list[tuple[int, str]], list[str]]:
    """A tool that fails ``failures`` times, then has its effect; what it saw, what it did."""
    seen: list[tuple[int, str]] = []
    effects: list[str] = []

    @tool(idempotent=idempotent, retry=retry)
    def pay(amount: int) -> str:
        """Pay an amount."""
        now = tool_context()
        seen.append((now.attempt, now.idempotency_key))
        if len(seen) <= failures:
            raise error if error is not None else ToolError("bank busy", retryable=True)
        effects.append(f"paid {amount}")
        return "paid"

    return pay, seen, effects


def run(target: Tool, ctx: ToolContext | None = None, **arguments: Any) -> Any:
    return asyncio.run(toolbox_of(ToolRegistry([target])).execute(
        call(target.name, **arguments), ctx or context()))


def test_a_tool_failing_twice_then_succeeding_is_retried_with_backoff_and_has_one_effect(
) -> None:
    pay, seen, effects = flaky(2, retry=RetryPolicy(max_attempts=3, initial_delay=0.05,
                                                    jitter=False))
    started = time.perf_counter()
    observation = run(pay, amount=5)
    assert (observation.output, observation.is_error, observation.attempts) == ("paid", False, 3)
    assert effects == ["paid 5"]
    # the same idempotency key on every attempt; the attempt counts up
    assert seen == [(1, "s1:c1"), (2, "s1:c1"), (3, "s1:c1")]
    assert time.perf_counter() - started >= 0.05 + 0.1  # waited 0.05 s, then 0.1 s


def test_a_non_idempotent_tool_that_timed_out_is_not_retried() -> None:
    runs: list[int] = []

    @tool(timeout=0.05, retry=QUICK)
    async def send(to: str) -> str:
        """Send a mail."""
        runs.append(1)
        await asyncio.sleep(1)
        return "sent"

    observation = run(send, to="a")
    assert observation.is_error and "timed out" in observation.output
    assert (observation.attempts, runs) == (1, [1])


def test_an_idempotent_tool_that_timed_out_is_retried() -> None:
    runs: list[int] = []

    @tool(timeout=0.05, idempotent=True, retry=QUICK)
    async def fetch(url: str) -> str:
        """Fetch a page."""
        runs.append(1)
        if len(runs) == 1:
            await asyncio.sleep(1)
        return "page"

    observation = run(fetch, url="u")
    assert (observation.output, observation.attempts, len(runs)) == ("page", 2, 2)


def test_a_connection_error_is_retried_only_for_an_idempotent_tool() -> None:
    pay, _, effects = flaky(1, error=ConnectionError("reset"))
    observation = run(pay, amount=1)
    assert observation.is_error and observation.attempts == 1 and not effects
    assert "ConnectionError: reset" in observation.output
    read, _, done = flaky(1, idempotent=True, error=ConnectionError("reset"))
    observation = run(read, amount=1)
    assert (observation.output, observation.attempts, done) == ("paid", 2, ["paid 1"])


def test_validation_errors_and_permanent_failures_are_never_retried() -> None:
    pay, seen, _ = flaky(5, error=ToolError("no such account"))
    observation = run(pay, amount=1)
    assert (observation.output, observation.attempts, len(seen)) == ("no such account", 1, 1)
    observation = run(pay, amount="lots")  # the tool never runs
    assert observation.is_error and observation.attempts == 1 and len(seen) == 1


def test_when_every_attempt_fails_the_model_reads_the_last_failure() -> None:
    pay, seen, effects = flaky(9)
    observation = run(pay, amount=1)
    assert (observation.output, observation.is_error, observation.retryable) == (
        "bank busy", True, True)
    assert observation.attempts == 3 == len(seen) and not effects


def test_backoff_never_sleeps_past_the_deadline() -> None:
    pay, seen, _ = flaky(9, retry=RetryPolicy(max_attempts=5, initial_delay=30.0, jitter=False))
    started = time.perf_counter()
    observation = run(pay, context(deadline=time.time() + 2.0), amount=1)
    assert observation.attempts == 1 and len(seen) == 1
    # not a speed check: a run that slept the 30 s backoff would take at least 30 s
    assert time.perf_counter() - started < 30


def test_the_runs_default_policy_applies_to_tools_without_their_own() -> None:
    pay, seen, _ = flaky(2, retry=None)
    assert run(pay, amount=1).attempts == 1 and len(seen) == 1
    seen.clear()
    assert run(pay, context(default_retry=QUICK), amount=1).attempts == 3
    own, mine, _ = flaky(1, retry=RetryPolicy(max_attempts=1))  # the tool's own policy wins
    assert run(own, context(default_retry=QUICK), amount=1).attempts == 1 and len(mine) == 1


def test_retry_is_given_as_attempts_a_policy_or_a_rule() -> None:
    assert tool(name="one", retry=4)(lambda: 1).retry == RetryPolicy(max_attempts=4)
    schema = Tool.from_schema(name="s", description="d", parameters={"type": "object"},
                              fn=lambda args: "x", retry=2)
    assert schema.retry == RetryPolicy(max_attempts=2)
    pay, _, _ = flaky(2, retry=None)
    listed = asyncio.run(WithRules(ToolRegistry([pay]), {"pay": ToolRule(retry=3)}
                                   ).list_tools())
    assert listed[0].retry == RetryPolicy(max_attempts=3)
    for wrong in (0, True, "3", 2.5):
        with pytest.raises(ToolDefinitionError):
            tool(name="one", retry=wrong)(lambda: 1)
    with pytest.raises(ConfigError):
        ToolRule(retry=0)
    with pytest.raises(ToolDefinitionError):
        RetryPolicy(factor=0.5)
    for settings in ({"jitter": "no"}, {"jitter": 1}, {"initial_delay": True},
                     {"max_delay": float("nan")}, {"factor": "2"}):
        with pytest.raises(ToolDefinitionError, match=f"RetryPolicy {next(iter(settings))}"):
            RetryPolicy(**settings)  # type: ignore[arg-type]


def test_the_delays_grow_by_the_factor_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_delay=1.0, factor=3.0, max_delay=5.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1.0, 3.0, 5.0, 5.0]
    assert RetryPolicy(factor=1e300).delay(5000) == 10.0


def test_an_agent_records_the_attempts_on_the_call_and_in_its_events() -> None:
    pay, _, effects = flaky(2, retry=None)
    finished: list[ev.ToolFinished] = []
    model = ScriptedModel(['Action: pay\nAction Input: {"amount": 3}', "Final Answer: done"])
    agent = Agent(model=model, tools=[pay],
                  tool_retry=RetryPolicy(max_attempts=3, initial_delay=0.001))
    result = agent.run("pay 3", on_event=lambda e: finished.append(e)
                       if isinstance(e, ev.ToolFinished) else None)
    observation = result.steps[0].calls[0].observation
    assert result.status == "completed" and effects == ["paid 3"]
    assert observation is not None and observation.attempts == 3
    assert [e.observation.attempts for e in finished] == [3]


def test_a_timeout_text_is_plain_text() -> None:
    @tool(timeout=0.01)
    async def slow() -> str:
        """Take long."""
        await asyncio.sleep(1)
        return "late"

    assert type(run(slow).output) is str

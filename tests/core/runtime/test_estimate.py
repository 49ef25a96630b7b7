"""Usage a server did not report: unknown in the result, estimated for the token budget."""

from __future__ import annotations

import json

from miniagent import Agent, Limits, ModelResponse, ScriptedModel, TokenUsage, tool
from miniagent.core.runtime.guards import tokens, with_estimate
from miniagent.core.session import new_usage
from miniagent.core.types import ModelRequest, ToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key} " * 20


def act(key: str) -> str:
    return f"Thought: look\nAction: lookup\nAction Input: {json.dumps({'key': key})}"


def unreported(content: str) -> ModelResponse:
    return ModelResponse(content=content, usage=TokenUsage.unknown())


def test_cjk_text_counts_a_token_a_character_ascii_four_characters() -> None:
    assert tokens("北京今天的天气怎么样") == 10
    assert tokens("What is the weather in Paris?") == 8
    assert tokens("北京 weather") == 2 + 2  # "北京" and " weather" (8 characters)


def test_an_unreported_usage_is_estimated_from_the_request_and_the_reply() -> None:
    request = ModelRequest(messages=[{"role": "user", "content": "北京" * 50}])
    reply = ModelResponse(content="晴" * 30, usage=TokenUsage.unknown(),
                          tool_calls=[ToolCall(id="c", name="w", raw_arguments='{"c": "x"}')])
    usage = with_estimate(reply, request).usage
    assert usage.total_tokens is None and usage.prompt_tokens is None
    assert 100 + 30 < usage.estimated_tokens < 100 + 30 + 30  # + the JSON and the call
    assert reply.usage.estimated_tokens == 0  # the reply itself is not changed


def test_a_reported_usage_and_a_model_s_own_count_are_kept() -> None:
    request = ModelRequest(messages=[{"role": "user", "content": "hi" * 400}])
    reported = ModelResponse(content="x", usage=TokenUsage(prompt_tokens=7, completion_tokens=1))
    counted = ModelResponse(content="x", usage=TokenUsage.unknown(estimated=3))
    assert with_estimate(reported, request) is reported
    assert with_estimate(counted, request).usage.estimated_tokens == 3


def test_sums_with_an_unknown_part_are_unknown_and_count_the_known_part() -> None:
    known = TokenUsage(prompt_tokens=90, completion_tokens=10, cached_tokens=40)
    total = known + TokenUsage.unknown(estimated=50)
    assert (total.known, total.total_tokens, total.cached_tokens) == (False, None, None)
    assert total.counted_tokens == 150 == (TokenUsage.unknown(estimated=50) + known).counted_tokens
    assert (known + known).total_tokens == 200 and (known + known).cached_tokens == 80


def test_what_a_sub_run_used_since_its_last_attempt_stays_unknown() -> None:
    before = TokenUsage(prompt_tokens=90, completion_tokens=10)
    after = before + TokenUsage.unknown(estimated=50)
    since = new_usage(after, before)
    assert (since.total_tokens, since.counted_tokens) == (None, 50)
    assert new_usage(before + before, before).total_tokens == 100


async def test_a_run_whose_server_reports_no_usage_has_it_unknown() -> None:
    model = ScriptedModel([unreported(act("k")), unreported("Thought: done\nFinal Answer: ok")])
    result = await Agent(model=model, tools=[lookup]).arun("北京天气？")
    assert result.status == "completed"
    assert result.usage.total_tokens is None and result.usage.prompt_tokens is None
    assert all(step.usage.total_tokens is None for step in result.steps)
    first, second = (step.usage.estimated_tokens for step in result.steps)
    assert 0 < first < second  # the second prompt holds the first reply and its observation
    assert result.usage.counted_tokens == first + second


async def test_the_token_budget_ends_a_run_on_estimates() -> None:
    model = ScriptedModel([unreported(act(f"k{n}")) for n in range(10)])
    result = await Agent(model=model, tools=[lookup], limits=Limits(token_budget=400)).arun("look")
    assert result.status == "budget_exceeded"
    assert result.reason.startswith("used ~") and "tokens (estimated) of a budget of 400" in (
        result.reason)
    assert result.usage.counted_tokens >= 400 and len(model.requests) < 10


async def test_a_known_step_then_an_unknown_one_counts_both_for_the_budget() -> None:
    heavy = ModelResponse(content=act("a"), usage=TokenUsage(prompt_tokens=300,
                                                             completion_tokens=20))
    model = ScriptedModel([heavy, unreported(act("b")), "Final Answer: never"])
    result = await Agent(model=model, tools=[lookup], limits=Limits(token_budget=330)).arun("look")
    assert result.status == "budget_exceeded" and len(model.requests) == 2
    assert result.usage.total_tokens is None
    assert result.usage.counted_tokens == 320 + result.steps[1].usage.estimated_tokens

"""What real small models (Qwen2.5-Coder 0.5B/1.5B, SmolLM2-135M) reply, and what the step
logic makes of it: calls written in the content, answers cut off by ``max_tokens``, plain prose
with no label, the last request at ``max_steps``, and the worked example copied."""

from __future__ import annotations

import json
from typing import Any

from miniagent import (
    Agent,
    Aids,
    Limits,
    ModelResponse,
    ModelSettings,
    ScriptedModel,
    TokenUsage,
    tool,
)
from miniagent.core.errors import ModelConnectionError
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.protocol.react import EXAMPLE_ANSWER, ReactProtocol
from miniagent.core.runtime.loop import AT_LIMIT
from miniagent.testing.stub_server import StubServer

stored: list[str] = []
paid: list[int] = []


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    left, right = expression.split("*")
    return str(int(left) * int(right))


@tool
def remember(text: str) -> str:
    """Store a note for later."""
    stored.append(text)
    return f"stored: {text}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def transfer(to: str, amount: int) -> str:
    """Move money."""
    paid.append(amount)
    return f"sent {amount} to {to}"


def act(name: str, args: dict[str, Any], thought: str = "use a tool") -> str:
    return f"Thought: {thought}\nAction: {name}\nAction Input: {json.dumps(args)}"


def cut(content: str) -> ModelResponse:
    return ModelResponse(content=content, finish_reason="length",
                         usage=TokenUsage(prompt_tokens=50, completion_tokens=64))


QWEN_CALL = '```json\n{"name": "calculator", "arguments": {"expression": "17 * 23"}}\n```'


# -- 1. a call written in the content is the call -----------------------------------------

def test_a_native_call_written_in_the_content_runs_over_http() -> None:
    script: list[Any] = [QWEN_CALL, "17 * 23 = 391."]
    with StubServer(script).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m", tool_mode="native")
        result = Agent(model=model, tools=[calculator]).run("What is 17 * 23?")
        sent = list(stub.requests)
    assert (result.status, result.final_answer) == ("completed", "17 * 23 = 391.")
    assert result.steps[0].observations[0].output == "391"
    assistant, observation = sent[1]["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "calculator"
    assert (observation["role"], observation["content"]) == ("tool", "391")
    assert observation["tool_call_id"] == assistant["tool_calls"][0]["id"]


def test_qwen_tags_in_auto_mode_run_every_call() -> None:
    stored.clear()
    tags = ('<tool_call>\n{"name": "calculator", "arguments": {"expression": "17 * 23"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "remember", "arguments": "{\\"text\\": '
            '\\"17*23\\"}"}\n</tool_call>')
    with StubServer([tags, "391, noted."]).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")  # auto
        result = Agent(model=model, tools=[calculator, remember]).run("17 * 23, and note it")
        sent = list(stub.requests)
    assert (result.status, result.final_answer) == ("completed", "391, noted.")
    assert [o.output for o in result.steps[0].observations] == ["391", "stored: 17*23"]
    assert stored == ["17*23"] and "tools" in sent[1]  # it stays native


async def test_json_that_names_no_offered_tool_is_still_the_answer() -> None:
    answer = '{"name": "Ann", "arguments": {"age": 4}}'
    model = ScriptedModel([{"content": answer}], tool_mode="native")
    result = await Agent(model=model, tools=[calculator]).arun("Give Ann's record as JSON")
    assert (result.status, result.final_answer) == ("completed", answer)


# -- 2. an answer cut off by max_tokens is never a completed answer --------------------------

async def test_a_native_answer_cut_off_is_retried_not_completed() -> None:
    whole = ModelResponse(content="Paris.", usage=TokenUsage(prompt_tokens=90,
                                                             completion_tokens=2))
    model = ScriptedModel([cut("The capital of France is Par"), whole], tool_mode="native")
    result = await Agent(model=model, tools=[calculator],
                         model_settings=ModelSettings(max_tokens=64)).arun("Capital?")
    assert (result.status, result.final_answer) == ("completed", "Paris.")
    note = model.requests[1].messages[-1]
    assert note["role"] == "user" and "cut off at the max_tokens limit (64 tokens)" in (
        note["content"])
    assert result.usage.total_tokens == 114 + 92  # the cut reply counted


async def test_a_react_answer_cut_off_is_retried_like_a_native_one() -> None:
    model = ScriptedModel([cut("Thought: I know\nFinal Answer: The capital is Par"),
                           "Final Answer: Paris"])
    result = await Agent(model=model, tools=[calculator],
                         model_settings=ModelSettings(max_tokens=64)).arun("Capital?")
    assert (result.status, result.final_answer) == ("completed", "Paris")
    assert "Format error: your reply was cut off" in model.requests[1].messages[-1]["content"]


async def test_replies_that_are_always_cut_off_never_complete() -> None:
    model = ScriptedModel([cut("The answer is a long one that goes")] * 5)
    result = await Agent(model=model, tools=[calculator],
                         limits=Limits(max_steps=3)).arun("Explain")
    assert (result.status, result.final_answer) == ("max_steps", None)
    assert len(model.requests) == 4  # the limit's last request was cut off too: no answer


async def test_a_call_written_in_a_cut_off_content_never_runs() -> None:
    paid.clear()
    written = cut('{"name": "transfer", "arguments": {"to": "Ana", "amount": 15}}')
    model = ScriptedModel([written, {"content": "I could not pay."}], tool_mode="native")
    result = await Agent(model=model, tools=[transfer],
                         model_settings=ModelSettings(max_tokens=64)).arun("pay Ana 1500")
    assert paid == [] and result.status == "completed"
    (observation,) = result.steps[0].observations
    assert "was not run" in observation.output and "64 tokens" in observation.output


async def test_a_native_call_cut_off_never_runs() -> None:
    paid.clear()
    call = ScriptedModel([{"choices": [{"index": 0, "finish_reason": "length", "message": {
        "role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "transfer", "arguments": '{"to": "Ana", "amount": 15}'}}]}}]},
        {"content": "not paid"}], tool_mode="native")
    result = await Agent(model=call, tools=[transfer]).arun("pay Ana 1500")
    assert paid == [] and "was not run" in result.steps[0].observations[0].output


# -- 3. plain prose with no action ---------------------------------------------------------

async def test_plain_prose_after_one_format_error_is_the_answer() -> None:
    model = ScriptedModel(["The answer is 87."] * 20)
    result = await Agent(model=model, tools=[add]).arun("What is 80 + 7?")
    assert (result.status, result.final_answer) == ("completed", "The answer is 87.")
    assert len(model.requests) == 2
    assert "Format error" in model.requests[1].messages[-1]["content"]


async def test_plain_prose_is_the_answer_at_once_when_no_tool_is_offered() -> None:
    model = ScriptedModel(["Thought: Paris is the capital of France."])
    result = await Agent(model=model).arun("Capital of France?")
    assert (result.status, result.final_answer) == (
        "completed", "Paris is the capital of France.")


async def test_plain_prose_after_a_tool_round_is_told_the_format_first() -> None:
    model = ScriptedModel(["I think 5.", act("add", {"a": 2, "b": 3}), "It is 5.", "It is 5."])
    result = await Agent(model=model, tools=[add]).arun("2+3?")
    assert (result.status, result.final_answer, len(result.steps)) == ("completed", "It is 5.", 4)
    assert [s.error is not None for s in result.steps] == [True, False, True, False]


async def test_plain_prose_is_never_the_answer_while_a_tool_must_be_called() -> None:
    model = ScriptedModel(["It is 5."] * 3 + [act("add", {"a": 2, "b": 3}), "Final Answer: 5"])
    result = await Agent(model=model, tools=[add], aids=Aids(tool_choice="required")).arun("2+3?")
    assert (result.status, result.final_answer) == ("completed", "5")
    assert result.steps[3].observations[0].output == "5"


# -- 4. at max_steps, the best answer ------------------------------------------------------

def lookups(n: int) -> list[Any]:
    return [ModelResponse(content=act("add", {"a": i, "b": 1}),
                          usage=TokenUsage(prompt_tokens=10, completion_tokens=5))
            for i in range(n)]


async def test_at_max_steps_the_model_gives_its_best_answer() -> None:
    last = ModelResponse(content="Thought: from the observations\nFinal Answer: 3",
                         usage=TokenUsage(prompt_tokens=40, completion_tokens=7))
    model = ScriptedModel([*lookups(3), last])
    events: list[str] = []
    agent = Agent(model=model, tools=[add], limits=Limits(max_steps=3))
    agent.subscribe(lambda e: events.append(e.kind))
    result = await agent.arun("count")
    assert (result.status, result.final_answer, result.answered_at_limit) == (
        "max_steps", "3", True)
    assert result.reason == ("max_steps=3 reached: the answer was given at the limit (one last "
                             "request, with no tools)")
    asked = model.requests[3]
    assert asked.tools is None and "Tools: none." in asked.messages[0]["content"]
    assert asked.messages[-1] == {"role": "user", "content": AT_LIMIT}
    before = model.requests[2].messages
    assert asked.messages[1:len(before)] == before[1:]  # the history goes on; no tools now
    assert result.usage.total_tokens == 3 * 15 + 47  # the last request counts
    assert events.count("model_started") == events.count("model_responded") == 4
    assert [m.content for m in result.messages[-2:]] == [AT_LIMIT, last.content]
    assert result.steps[-1].final_answer == "3" and result.steps[-1].offered_tools == []


async def test_a_native_plain_answer_at_the_limit() -> None:
    calls = [{"content": None, "tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]}
             for i in range(2)]
    model = ScriptedModel([*calls, {"content": "1, then 2."}], tool_mode="native")
    result = await Agent(model=model, tools=[add], limits=Limits(max_steps=2)).arun("count")
    assert (result.status, result.final_answer) == ("max_steps", "1, then 2.")
    assert model.requests[2].tools is None


async def test_a_failed_last_request_leaves_the_result_as_the_limit_does() -> None:
    model = ScriptedModel([*lookups(2), ModelConnectionError("gone")])
    result = await Agent(model=model, tools=[add], limits=Limits(max_steps=2)).arun("count")
    assert (result.status, result.reason, result.final_answer) == (
        "max_steps", "no final answer after max_steps=2", None)
    assert not result.answered_at_limit and len(result.steps) == 2


async def test_no_last_request_when_the_budget_is_spent() -> None:
    model = ScriptedModel([*lookups(2), "Final Answer: never asked"])
    result = await Agent(model=model, tools=[add],
                         limits=Limits(max_steps=2, token_budget=30)).arun("count")
    assert (result.status, len(model.requests)) == ("max_steps", 2)


# -- 5. the worked example copied ----------------------------------------------------------

def example_agent(script: list[Any], tools: list[Any]) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    return Agent(model=model, tools=tools, protocol=ReactProtocol(example=True)), model


async def test_a_call_with_the_examples_placeholders_is_not_run() -> None:
    stored.clear()
    agent, model = example_agent([act("remember", {"text": "..."}),
                                  act("remember", {"text": "milk"}), "Final Answer: noted"],
                                 [remember])
    result = await agent.arun("Remember to buy milk")
    assert 'Action Input: {"text":"..."}' in model.requests[0].messages[0]["content"]
    assert stored == ["milk"] and result.status == "completed"
    first = result.steps[0].observations[0].output
    assert "was not run" in first and 'placeholder "..."' in first


async def test_numbers_copied_as_the_example_shows_them_are_not_run() -> None:
    copied = 'Thought: I should call add\nAction: add\nAction Input: {"a":<integer>,"b":<integer>}'
    agent, _ = example_agent([copied, act("add", {"a": 2, "b": 3}), "Final Answer: 5"], [add])
    result = await agent.arun("2+3?")
    assert "placeholder <integer>" in result.steps[0].observations[0].output
    assert (result.final_answer, result.steps[1].observations[0].output) == ("5", "5")


async def test_the_examples_final_answer_copied_is_no_answer() -> None:
    agent, _ = example_agent([act("add", {"a": 2, "b": 3}),
                              f"Thought: I now know the final answer\nFinal Answer: "
                              f"{EXAMPLE_ANSWER}", "Final Answer: 5"], [add])
    result = await agent.arun("2+3?")
    assert (result.status, result.final_answer) == ("completed", "5")
    assert "example's placeholder text" in (result.steps[1].error or "")

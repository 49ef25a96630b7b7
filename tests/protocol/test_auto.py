"""The auto protocol over real HTTP: a native reply that is a ReAct step is read as that step,
and a server that took the tools without showing them to the model is spoken to in ReAct."""

from __future__ import annotations

import logging

import pytest

from miniagent import Agent, OpenAICompatibleModel, tool
from miniagent.testing.stub_server import StubServer


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


def test_a_native_reply_that_is_a_react_action_runs_the_tool_and_the_run_goes_on_in_react(
        caplog: pytest.LogCaptureFixture) -> None:
    # llama-cpp-python's server in its default chat format takes `tools` with a 200 and never
    # puts them in the prompt; a model that was shown ReAct elsewhere answers in ReAct
    script = ['Thought: add them\nAction: add\nAction Input: {"a": 2, "b": 3}',
              "Thought: done\nFinal Answer: 5"]
    with StubServer(script).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")  # auto mode
        with caplog.at_level(logging.WARNING, logger="miniagent"):
            result = Agent(model=model, tools=[add]).run("What is 2+3?")
        sent = list(stub.requests)
    assert (result.status, result.final_answer) == ("completed", "5")
    assert result.steps[0].observations[0].output == "5"
    assert "tools" in sent[0] and "tools" not in sent[1]  # ReAct from the second request on
    assert "Observation: 5" in str(sent[1]["messages"])
    said = [r.getMessage() for r in caplog.records if "ReAct action" in r.getMessage()]
    assert len(said) == 1


def test_a_react_final_answer_in_a_native_reply_is_the_answer_alone() -> None:
    script = [{"content": None, "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]},
              "Thought: I know it\nFinal Answer: 2"]
    with StubServer(script).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")
        result = Agent(model=model, tools=[add]).run("1+1?")
        sent = list(stub.requests)
    assert (result.status, result.final_answer) == ("completed", "2")
    assert all("tools" in body for body in sent)  # it went on natively: the server uses tools


def test_text_that_only_mentions_an_action_is_an_answer() -> None:
    answer = "I would use Action: add here, but 2+3 is simply 5."
    with StubServer([answer]).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")
        result = Agent(model=model, tools=[add]).run("What is 2+3?")
    assert (result.status, result.final_answer) == ("completed", answer)
    assert not result.steps[0].calls

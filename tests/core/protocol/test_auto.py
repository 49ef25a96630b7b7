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


# -- a server that takes tools and never shows them: prompt_tokens tells ---------------------

HIDDEN_SCRIPT = ["2 + 3 is 23.",  # the plain answer of a model that was never shown the tools
                 'Thought: add them\nAction: add\nAction Input: {"a": 2, "b": 3}',
                 "Thought: done\nFinal Answer: 5"]


def test_a_server_that_hides_the_tools_is_asked_the_same_step_again_in_react(
        caplog: pytest.LogCaptureFixture) -> None:
    ran: list[dict[str, int]] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append({"a": a, "b": b})
        return a + b

    with StubServer(HIDDEN_SCRIPT, shows_tools=False).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")  # auto mode
        with caplog.at_level(logging.WARNING, logger="miniagent"):
            result = Agent(model=model, tools=[add]).run("What is 2+3?")
        sent = list(stub.requests)
    assert ran == [{"a": 2, "b": 3}]  # the tool ran
    assert (result.status, result.final_answer) == ("completed", "5")
    first = result.steps[0]
    assert first.raw_output == HIDDEN_SCRIPT[1] and first.error is None  # one step, in ReAct
    assert first.usage.prompt_tokens == 20  # both replies of the step are counted
    assert "tools" in sent[0] and not any("tools" in body for body in sent[1:])
    assert [m["role"] for m in sent[1]["messages"]] == ["system", "user"]  # a clean transcript
    assert "23" not in str(sent[1]["messages"]) and "Action Input" in str(sent[1]["messages"])
    said = [r.getMessage() for r in caplog.records if "without showing" in r.getMessage()]
    assert len(said) == 1 and "prompt_tokens 10, the tools alone need about" in said[0]


def test_the_agent_remembers_a_server_that_hides_the_tools() -> None:
    again = ['Thought: add\nAction: add\nAction Input: {"a": 1, "b": 1}', "Final Answer: 2"]
    with StubServer([*HIDDEN_SCRIPT, *again], shows_tools=False).run_in_thread() as stub:
        agent = Agent(model=OpenAICompatibleModel(base_url=stub.base_url, model="m"),
                      tools=[add])
        assert agent.run("What is 2+3?").final_answer == "5"
        assert agent.run("1+1?").final_answer == "2"
        sent = list(stub.requests)
    assert len(sent) == 5 and not any("tools" in body for body in sent[3:])  # ReAct at once


def test_an_empty_reply_from_a_server_that_hides_the_tools_is_asked_again_too() -> None:
    # chatml-function-calling with tool_choice auto and no system message: the tools are not in
    # the prompt, and its "message" branch answers with empty content
    script = ["", 'Thought: add\nAction: add\nAction Input: {"a": 2, "b": 3}', "Final Answer: 5"]
    with StubServer(script, shows_tools=False).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")
        result = Agent(model=model, tools=[add]).run("What is 2+3?")
    assert (result.status, result.final_answer) == ("completed", "5")
    assert result.steps[0].error is None and result.steps[0].observations[0].output == "5"


def test_a_server_that_shows_the_tools_keeps_native_calling(
        caplog: pytest.LogCaptureFixture) -> None:
    replies = ["Hello! How can I help?", "Hi again."]
    with StubServer(replies).run_in_thread() as stub:  # prompt_tokens grow with the tools
        agent = Agent(model=OpenAICompatibleModel(base_url=stub.base_url, model="m"),
                      tools=[add])
        with caplog.at_level(logging.WARNING, logger="miniagent"):
            first, second = agent.run("hello"), agent.run("hello again")
        sent = list(stub.requests)
    assert (first.final_answer, second.final_answer) == tuple(replies)
    assert len(sent) == 2 and all("tools" in body for body in sent)
    assert all(body["tool_choice"] == "auto" for body in sent)  # sent with the tools
    assert not caplog.records


def test_a_server_that_reports_no_usage_is_not_judged() -> None:
    with StubServer(["2 + 3 is 5."], report_usage=False).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="m")
        result = Agent(model=model, tools=[add]).run("What is 2+3?")
    assert (result.status, result.final_answer) == ("completed", "2 + 3 is 5.")

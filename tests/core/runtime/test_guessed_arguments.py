"""A call never runs with guessed arguments (issue 33, point 3).

``Action Input: {"to": "bob",, "body": }`` once ran ``send(to="bob", body="")``: the JSON
repair made up the missing value. Each shape below needs something invented (a value, a key,
a ``:``, a closing bracket or quote, the end of an object closed too early) and goes through
the real loop in both ReAct and native mode: the tool does not run, the model is told what is
missing, and its corrected call then runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from miniagent import Agent, Limits, ScriptedModel, tool

INVENTED = {
    "the issue's call": '{"to": "bob",, "body": }',
    "a missing value": '{"to": "bob", "body": }',
    "a missing value before a comma": '{"to": "bob", "body": , "cc": "ann"}',
    "a missing value inside": '{"to": "bob", "body": {"text": }}',
    "a key without ':' or value": '{"to": "bob", "body"}',
    "a missing key": '{"to": "bob", : "hi"}',
    "a member between two commas": '{"to": "bob",, "body": "hi"}',
    "a value between two commas": '{"to": ["bob",, "ann"], "body": "hi"}',
    "a missing ':'": '{"to" "bob", "body": "hi"}',
    "a bare word": '{"to": bob, "body": "hi"}',
    "a closing bracket missing inside": '{"to": ["bob", "body": "hi"}',
    "a closing bracket of the wrong kind": '{"to": ["bob"}, "body": "hi"}',
    "a closing brace missing at the end": '{"to": "bob", "body": "hi"',
    "a closing quote missing at the end": '{"to": "bob", "body": "hi',
    "closed too early, content after": '{"to": "bob"}, "body": "hi"}',
}

KEPT = {
    "single quotes and a trailing comma": ("{'to': 'bob', 'body': 'hi',}", "hi"),
    "Python literals": ('{"to": "bob", "body": "hi", "cc": None, "urgent": False}', "hi"),
    "a fence": ('```json\n{"to": "bob", "body": "hi",}\n```', "hi"),
    "a raw line break and a regex": ('{"to": "bob", "body": "a\nb \\d+",}', "a\nb \\d+"),
    "a key without quotes and a comment": ('{to: "bob", /* short */ body: "hi",}', "hi"),
}


def send_tool(sent: list[dict[str, Any]]) -> Any:
    @tool
    def send(to: str | list[str], body: str | dict[str, Any] = "", cc: str | None = None,
             urgent: bool = False) -> str:
        """Send a message.

        Args:
            to: who gets it
            body: the text
            cc: a copy to
            urgent: flag it
        """
        sent.append({"to": to, "body": body})
        return "sent"

    return send


def reply(mode: str, raw: str) -> Any:
    """The model's call of ``send`` with ``raw`` as the argument text, in ``mode``."""
    if mode == "react":
        return f"Thought: send it\nAction: send\nAction Input: {raw}"
    return {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "send", "arguments": raw}}]}


def answer(mode: str) -> str:
    return "Final Answer: done" if mode == "react" else "done"


@pytest.mark.parametrize("mode", ["react", "native"])
@pytest.mark.parametrize("shape", list(INVENTED))
async def test_a_call_that_needs_a_guess_does_not_run(shape: str, mode: str) -> None:
    sent: list[dict[str, Any]] = []
    fixed = '{"to": "bob", "body": "hi"}'
    model = ScriptedModel([reply(mode, INVENTED[shape]), reply(mode, fixed), answer(mode)],
                          tool_mode=mode)  # type: ignore[arg-type]
    result = await Agent(model=model, tools=[send_tool(sent)],
                         limits=Limits(max_steps=5)).arun("mail bob")

    assert (result.status, result.final_answer) == ("completed", "done")
    assert sent == [{"to": "bob", "body": "hi"}]  # only the corrected call ran
    observation = result.steps[0].observations[0]
    assert observation.is_error
    assert "not valid JSON" in observation.output or "was not run" in observation.output
    told = json.dumps(model.requests[1].messages, ensure_ascii=False)
    assert json.dumps(observation.output, ensure_ascii=False)[1:-1] in told


@pytest.mark.parametrize("mode", ["react", "native"])
@pytest.mark.parametrize("shape", list(KEPT))
async def test_a_repair_that_keeps_the_meaning_still_runs(shape: str, mode: str) -> None:
    sent: list[dict[str, Any]] = []
    raw, body = KEPT[shape]
    model = ScriptedModel([reply(mode, raw), answer(mode)], tool_mode=mode)  # type: ignore[arg-type]
    result = await Agent(model=model, tools=[send_tool(sent)],
                         limits=Limits(max_steps=5)).arun("mail bob")
    assert (result.status, result.final_answer) == ("completed", "done")
    assert sent == [{"to": "bob", "body": body}]

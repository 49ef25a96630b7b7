"""The CLI names the model of a FallbackModel that answered: the line after each reply, the
steps of ``--json`` and of ``miniagent sessions show``."""

from __future__ import annotations

import io

from rich.console import Console

from miniagent import Agent, FallbackModel, ModelConnectionError, ScriptedModel, tool
from miniagent.cli.display import TraceDisplay, result_to_json
from miniagent.cli.session_view import print_session


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_the_cli_names_the_model_that_answered_each_step() -> None:
    model = FallbackModel({
        "main": ScriptedModel(['Thought: add\nAction: add\nAction Input: {"a": 2, "b": 3}',
                               ModelConnectionError("connection refused")]),
        "backup": ScriptedModel(["Thought: done\nFinal Answer: 5"])})
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, emoji=False)
    agent = Agent(model=model, tools=[add])
    result = agent.run("2+3?", on_event=TraceDisplay(console))
    shown = out.getvalue()
    assert result.final_answer == "5"
    assert shown.index("s · main · ") < shown.index("s · backup · ")  # the line of each reply
    assert [step["model"] for step in result_to_json(result)["trace"]] == ["main", "backup"]
    out.truncate(0)
    print_session(console, agent.session(result.session_id))
    assert "step 1 · main" in out.getvalue() and "step 2 · backup" in out.getvalue()

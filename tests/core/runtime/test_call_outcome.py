"""CallRecord.outcome: every completed call says whether it ran, was denied or was answered
without running; derived from the recorded moves, so the saved form does not change."""

from __future__ import annotations

import json
from pathlib import Path

from miniagent import Agent, Limits, ScriptedModel, tool
from miniagent.core.session import AgentSession

REFERENCE = Path(__file__).parent / "reference"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first
        b: second
    """
    return a + b


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something.

    Args:
        target: what to wipe
    """
    return "wiped " + target


def test_ran_denied_and_not_run_calls_of_a_real_run() -> None:
    same = 'Action: add\nAction Input: {"a": 1, "b": 2}'
    model = ScriptedModel([same, same, 'Action: wipe\nAction Input: {"target": "disk"}',
                           "Final Answer: 3"])
    agent = Agent(model=model, tools=[add, wipe],
                  limits=Limits(repeat_limit=2, answer_after_repeat=False),
                  approver=lambda pending: False)
    result = agent.run("1+2?")
    assert result.status == "completed", result.reason
    calls = [record for step in result.steps for record in step.calls]
    assert [(r.call.name, r.state, r.outcome) for r in calls] == [
        ("add", "completed", "ran"),
        ("add", "completed", "not_run"),  # repeated: answered with an intervention
        ("wipe", "completed", "denied"),
    ]
    saved = agent.store.load(result.session_id).to_dict()
    assert "outcome" not in json.dumps(saved)  # derived, never saved


def test_calls_saved_without_moves_have_no_outcome() -> None:
    data = json.loads((REFERENCE / "session_v1.json").read_text(encoding="utf-8"))
    session = AgentSession.from_dict(data)
    records = [record for step in session.steps for record in step.calls]
    assert records and all(record.outcome is None for record in records)

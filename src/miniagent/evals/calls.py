"""Tool-call accuracy: did a run call the right tools with valid arguments?

A run's *valid calls* are the calls of registered tools whose arguments validated, in the
order they were made, with the arguments as the tool's own coercion made them (``"20"`` for
an integer is 20) and then as JSON values. A call repeated right after it (the same tool and
arguments, as a model does after an error or a fault) counts once. The expected calls are
coerced the same way. With ``calls_match="order"`` (the default) the expected calls must
appear among the valid calls in that order; with ``"set"``, in any order. Other calls may
come between them (a calculator call on the way is not a mistake); an expected call without
``arguments`` matches any valid call of that tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from miniagent.core.tools.tool import check_arguments
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import RunResult, ToolCall
from miniagent.evals.tasks import EvalTask, ExpectedCall


@dataclass(kw_only=True)
class CallScore:
    """What a run's calls were, and whether they were the expected ones."""

    correct: bool | None
    """None when the task expects no calls."""
    made: int = 0
    invalid: int = 0
    """Calls of unknown tools or with arguments that did not validate."""
    valid: list[dict[str, Any]] = field(default_factory=list)


def score_calls(task: EvalTask, result: RunResult, tools: ToolRegistry) -> CallScore:
    """Score the calls of ``result`` against ``task.expected_calls``."""
    calls = [record.call for step in result.steps for record in step.calls]
    valid: list[dict[str, Any]] = []
    invalid = 0
    for call in calls:
        coerced = _coerced(call, tools)
        if coerced is None:
            invalid += 1
        elif not valid or valid[-1] != coerced:
            valid.append(coerced)
    score = CallScore(correct=None, made=len(calls), invalid=invalid, valid=valid)
    if task.expected_calls:
        wanted = [_expected(call, tools) for call in task.expected_calls]
        if task.calls_match == "set":
            score.correct = _contains_all(valid, wanted)
        else:
            score.correct = _in_order(valid, wanted)
    return score


def _matches(made: dict[str, Any], wanted: dict[str, Any]) -> bool:
    if made["name"] != wanted["name"]:
        return False
    return wanted["arguments"] is None or made["arguments"] == wanted["arguments"]


def _in_order(made: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> bool:
    """Every wanted call, in this order, among the calls made (others may come between)."""
    position = 0
    for call in made:
        if position < len(wanted) and _matches(call, wanted[position]):
            position += 1
    return position == len(wanted)


def _contains_all(made: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> bool:
    """Every wanted call among the calls made, in any order, each matched by its own call."""
    free = list(made)
    for target in wanted:
        found = next((c for c in free if _matches(c, target)), None)
        if found is None:
            return False
        free.remove(found)
    return True


def _coerced(call: ToolCall, tools: ToolRegistry) -> dict[str, Any] | None:
    target = tools.get(call.name) if isinstance(call.name, str) else None
    if target is None:
        return None
    values = check_arguments(target, call)
    if isinstance(values, str):
        return None
    return {"name": call.name, "arguments": to_jsonable_python(values, fallback=str)}


def _expected(call: ExpectedCall, tools: ToolRegistry) -> dict[str, Any]:
    if call.arguments is None:
        return {"name": call.name, "arguments": None}
    as_call = ToolCall(id="expected", name=call.name, arguments=dict(call.arguments),
                       raw_arguments=json.dumps(call.arguments, ensure_ascii=False))
    coerced = _coerced(as_call, tools)
    return coerced if coerced is not None else {"name": call.name,
                                                "arguments": dict(call.arguments)}

"""A running tool reads its call's context; the idempotency key survives a resume."""

from __future__ import annotations

import pytest

from miniagent import (
    Agent,
    InMemoryStore,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    tool,
    tool_context,
)

SEEN: list[tuple[str, str, str, int]] = []


@tool
def record_sync(x: int) -> str:
    """Record the context of this call."""
    ctx = tool_context()
    SEEN.append((ctx.tool, ctx.session_id, ctx.idempotency_key, ctx.step))
    return "ok"


@tool
async def record_async(x: int) -> str:
    """Record the context of this call (async)."""
    ctx = tool_context()
    SEEN.append((ctx.tool, ctx.session_id, ctx.idempotency_key, ctx.step))
    return "ok"


def _call(name: str, call_id: str) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id=call_id, name=name, arguments={"x": 1})])


def test_sync_and_async_tools_see_their_call() -> None:
    SEEN.clear()
    model = ScriptedModel([_call("record_sync", "c1"), _call("record_async", "c2"),
                           "Final Answer: done"], tool_mode="native")
    result = Agent(model=model, tools=[record_sync, record_async]).run("go")
    assert result.status == "completed"
    sid = result.session_id
    expected = [("record_sync", sid, f"{sid}:c1", 1), ("record_async", sid, f"{sid}:c2", 2)]
    assert expected == SEEN


def test_outside_a_call_it_is_a_clear_error() -> None:
    with pytest.raises(LookupError, match="only available inside a tool call"):
        tool_context()


def test_the_key_is_the_same_when_a_resumed_session_reruns_the_call() -> None:
    SEEN.clear()
    store = InMemoryStore()
    first = ScriptedModel([_call("record_sync", "c9")], tool_mode="native")
    approving = Agent(model=first, store=store,
                      tools=[tool(record_sync.fn, requires_approval=True)])
    waiting = approving.run("go")
    assert waiting.status == "awaiting_approval"
    approving.model = ScriptedModel(["Final Answer: done"], tool_mode="native")
    approving.approve(waiting.session_id, "c9")
    done = approving.resume(waiting.session_id)
    assert done.status == "completed"
    sid = waiting.session_id
    assert [("record_sync", sid, f"{sid}:c9", 1)] == SEEN

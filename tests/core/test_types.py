"""``types.replaced``: the hot path's copy of a dataclass, equal to ``dataclasses.replace``."""

from __future__ import annotations

import dataclasses

import pytest

from miniagent.core.types import (
    ModelResponse,
    Observation,
    TokenUsage,
    ToolCall,
    ToolContext,
    replaced,
)


@pytest.mark.parametrize("obj, changes", [
    (ToolCall(id="a", name="add", arguments={"a": 1}), {"id": "b"}),
    (Observation(call_id="a", tool_name="add", output="3"),
     {"call_id": "x", "tool_name": "y", "elapsed": 0.5}),
    (ModelResponse(content="hi", usage=TokenUsage(prompt_tokens=1)), {"content": "ho"}),
    (ToolContext.for_call("s", "c", "add", 1, {}), {"attempt": 2}),  # frozen
])
def test_replaced_equals_dataclasses_replace(obj: object, changes: dict) -> None:
    copy = replaced(obj, **changes)
    assert copy == dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    assert copy is not obj and type(copy) is type(obj)


def test_replaced_leaves_fields_outside_init_to_dataclasses_replace() -> None:
    @dataclasses.dataclass
    class Counted:
        name: str
        seen: int = dataclasses.field(init=False, default=0)

    item = Counted("a")
    item.seen = 5
    assert replaced(item, name="b") == dataclasses.replace(item, name="b")
    with pytest.raises(TypeError):
        replaced(ToolCall(id="a", name="add"), no_such_field=1)


def test_replaced_with_one_field_or_none() -> None:
    @dataclasses.dataclass(frozen=True)
    class One:
        value: int

    @dataclasses.dataclass
    class Empty:
        pass

    assert replaced(One(1)) == One(1) and replaced(One(1), value=2) == One(2)
    assert replaced(Empty()) == Empty()

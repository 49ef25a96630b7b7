"""Property test: nothing a model sends makes ``ToolRegistry.execute`` raise."""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from miniagent.core.errors import ToolError
from miniagent.core.tools.calculator import calculator
from miniagent.core.tools.tool import tool
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import Observation, ToolCall
from tool_calls import execute, execute_all


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class Filters(BaseModel):
    tags: list[str] = []
    limit: int | None = None


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def echo(text: str) -> str:
    """Echo."""
    return text


async def structured(
    query: str, filters: Filters, mode: Mode = Mode.FAST, unit: Literal["a", "b"] = "a"
) -> dict[str, Any]:
    """Return everything it got, as JSON."""
    return {"query": query, "filters": filters, "mode": mode.value, "unit": unit}


def anything(value: Any = None, extra: dict[str, Any] | None = None) -> Any:
    """Return the input as is (formatted by the registry)."""
    return value


def no_args() -> None:
    """Nothing."""


def picky(flag: bool) -> str:
    """Raise for some inputs."""
    if flag:
        raise ToolError("flag must be false")
    raise ValueError("never happy")


REGISTRY = ToolRegistry(
    [add, echo, structured, anything, no_args, picky, tool(timeout=1.0)(calculator)]
)
NAMES = REGISTRY.names

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
argument_names = st.sampled_from(
    ["a", "b", "text", "query", "filters", "mode", "unit", "value", "extra", "flag", "expression"]
) | st.text(max_size=10)
arguments = st.dictionaries(argument_names, json_values, max_size=5)
raw_texts = st.one_of(
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.sampled_from(['{"a": 1', "Paris", "'quoted'", "[1, 2]", "{}", "null", "  ", "1 + 2"]),
)
tool_names = st.sampled_from(NAMES) | st.text(max_size=20)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    # Hypothesis drives sync tests; one loop for all examples keeps them fast.
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.run_until_complete(event_loop.shutdown_default_executor())
    event_loop.close()


@settings(max_examples=300, deadline=None)
@given(
    name=tool_names,
    args=arguments,
    raw=raw_texts,
    error=st.none() | st.text(max_size=30),
)
def test_execute_never_raises(
    loop: asyncio.AbstractEventLoop, name: str, args: dict[str, Any], raw: str, error: str | None
) -> None:
    call = ToolCall(id="fuzz", name=name, arguments=args, raw_arguments=raw, arguments_error=error)
    obs = loop.run_until_complete(execute(REGISTRY, call))
    assert isinstance(obs, Observation)
    assert isinstance(obs.output, str)
    assert obs.call_id == "fuzz" and obs.tool_name == name
    if name not in REGISTRY:
        assert obs.is_error and "Unknown tool" in obs.output
    elif error:
        assert obs.is_error and "not valid JSON" in obs.output


@settings(max_examples=100, deadline=None)
@given(batch=st.lists(st.tuples(tool_names, arguments, raw_texts), max_size=6))
def test_execute_all_never_raises_and_keeps_order(
    loop: asyncio.AbstractEventLoop, batch: list[tuple[str, dict[str, Any], str]]
) -> None:
    calls = [
        ToolCall(id=str(i), name=name, arguments=args, raw_arguments=raw)
        for i, (name, args, raw) in enumerate(batch)
    ]
    observations = loop.run_until_complete(execute_all(REGISTRY, calls))
    assert [o.call_id for o in observations] == [str(i) for i in range(len(batch))]
    assert all(isinstance(o.output, str) for o in observations)


@settings(max_examples=200, deadline=None)
@given(expression=st.text(alphabet="0123456789+-*/%.() eEpiqrtsoclgxfnab_*", max_size=40))
def test_calculator_only_returns_numbers_or_tool_errors(expression: str) -> None:
    try:
        result = calculator(expression)
    except ToolError:
        return
    assert isinstance(result, int | float)

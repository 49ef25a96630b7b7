"""ToolRegistry: registration, argument handling, execution, error observations."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from miniagent.core.errors import ToolDefinitionError, ToolError
from miniagent.core.tools.tool import Tool, tool
from miniagent.core.tools.toolbox import NO_OUTPUT, ToolRegistry, format_result
from miniagent.core.types import Observation, ToolCall
from tool_calls import execute, execute_all


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool(name="search_docs", description="Search the documentation.", timeout=5.0)
async def search(query: str, limit: int = 5) -> list[str]:
    return [f"{query}-{i}" for i in range(limit)]


def weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"{city}: 20 {unit}"


class Person(BaseModel):
    name: str
    age: int


@dataclass
class Reading:
    sensor: str
    value: float


def call(name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> ToolCall:
    return ToolCall(id="call-1", name=name, arguments=arguments or {}, **extra)


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([add, search, weather])


# -- definition and registration -----------------------------------------------------


def test_tool_stays_callable_and_exposes_metadata() -> None:
    assert add(2, 3) == 5
    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]
    assert add.timeout is None
    assert add.__name__ == "add"
    assert search.name == "search_docs"
    assert search.description == "Search the documentation."
    assert search.timeout == 5.0
    assert search.is_async and not add.is_async


async def test_async_tool_stays_awaitable() -> None:
    assert await search("x", 2) == ["x-0", "x-1"]


def test_registry_accepts_tools_and_plain_callables(registry: ToolRegistry) -> None:
    assert registry.names == ["add", "search_docs", "weather"]
    assert "weather" in registry and "nope" not in registry
    assert len(registry) == 3
    assert [t.name for t in registry] == registry.names
    assert all(isinstance(t, Tool) for t in registry)
    assert registry.get("add") is add
    assert registry.get("missing") is None
    schemas = [t.openai_schema() for t in registry]
    assert [s["function"]["name"] for s in schemas] == registry.names


def test_register_returns_tool_and_rejects_duplicates() -> None:
    registry = ToolRegistry()
    registered = registry.register(weather)
    assert isinstance(registered, Tool) and registered.name == "weather"
    with pytest.raises(ToolDefinitionError, match="weather"):
        registry.register(weather)
    with pytest.raises(ToolDefinitionError, match="already registered"):
        ToolRegistry([add, add])


def test_tool_options_rewrap_an_existing_tool() -> None:
    assert tool(add) is add
    renamed = tool(name="plus", timeout=1.0)(add)
    assert renamed.name == "plus" and renamed.timeout == 1.0 and renamed(1, 1) == 2


def test_rewrapping_keeps_the_options_it_does_not_give() -> None:
    def rule(args: dict[str, Any]) -> bool:
        return bool(args)

    base = tool(idempotent=True, requires_approval=rule, max_concurrency=2, inline=True)(add)
    slow = tool(timeout=2.0)(base)
    assert (slow.name, slow.description, slow.idempotent, slow.requires_approval,
            slow.max_concurrency, slow.timeout) == (
        "add", base.description, True, rule, 2, 2.0)
    assert base.inline and not slow.inline  # a timeout needs a worker thread
    assert tool(name="plus")(base).inline


def test_invalid_timeout_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="timeout"):
        tool(timeout=0)(weather)


# -- successful execution ------------------------------------------------------------


async def test_execute_sync_tool(registry: ToolRegistry) -> None:
    obs = await execute(registry, ToolCall(id="c7", name="add", arguments={"a": 2, "b": 3}))
    assert obs == Observation(
        call_id="c7", tool_name="add", output="5", is_error=False, elapsed=obs.elapsed
    )
    assert obs.elapsed >= 0


async def test_execute_async_tool_with_default(registry: ToolRegistry) -> None:
    obs = await execute(registry, call("search_docs", {"query": "q", "limit": 2}))
    assert not obs.is_error
    assert json.loads(obs.output) == ["q-0", "q-1"]


async def test_lax_coercion_reaches_the_function() -> None:
    seen: dict[str, Any] = {}

    def record(n: int, flag: bool, ratio: float, label: str) -> str:
        """Record."""
        seen.update(n=n, flag=flag, ratio=ratio, label=label)
        return "ok"

    registry = ToolRegistry([record])
    args = {"n": "20", "flag": "true", "ratio": "0.5", "label": 7}
    obs = await execute(registry, call("record", args))
    assert not obs.is_error, obs.output
    assert seen == {"n": 20, "flag": True, "ratio": 0.5, "label": "7"}


async def test_nested_model_argument_is_validated_into_the_model() -> None:
    received: list[Person] = []

    def greet(person: Person) -> str:
        """Greet."""
        received.append(person)
        return f"hi {person.name}"

    registry = ToolRegistry([greet])
    obs = await execute(registry, call("greet", {"person": {"name": "Ada", "age": "36"}}))
    assert obs.output == "hi Ada"
    assert received == [Person(name="Ada", age=36)]


async def test_positional_only_parameters() -> None:
    def power(base: int, /, exp: int = 2) -> int:
        """Power."""
        return base**exp

    obs = await execute(ToolRegistry([power]), call("power", {"base": 3, "exp": 3}))
    assert obs.output == "27"


# -- result formatting ---------------------------------------------------------------


def test_format_result_variants() -> None:
    assert format_result("text") == "text"
    assert format_result(None) == NO_OUTPUT == "(no output)"
    assert format_result(42) == "42"
    assert format_result({"城市": "北京"}) == '{"城市": "北京"}'
    assert format_result([1, "二"]) == '[1, "二"]'
    assert json.loads(format_result(Person(name="李", age=3))) == {"name": "李", "age": 3}
    assert "李" in format_result(Person(name="李", age=3))
    assert json.loads(format_result(Reading(sensor="t", value=1.5))) == {
        "sensor": "t",
        "value": 1.5,
    }
    assert format_result(b"bytes") == "bytes"


async def test_json_result_keeps_chinese_text_readable() -> None:
    def cities() -> dict[str, list[str]]:
        """Cities."""
        return {"cities": ["北京", "上海"]}

    obs = await execute(ToolRegistry([cities]), call("cities"))
    assert obs.output == '{"cities": ["北京", "上海"]}'


async def test_none_result() -> None:
    def nothing() -> None:
        """Nothing."""

    obs = await execute(ToolRegistry([nothing]), call("nothing"))
    assert obs.output == NO_OUTPUT and not obs.is_error


# -- errors the model caused ---------------------------------------------------------


async def test_unknown_tool_lists_available_names(registry: ToolRegistry) -> None:
    obs = await execute(registry, call("ad"))
    assert obs.is_error
    assert obs.tool_name == "ad"
    assert "Unknown tool 'ad'" in obs.output
    assert "add, search_docs, weather" in obs.output
    assert "Did you mean 'add'?" in obs.output


async def test_unknown_tool_in_empty_registry() -> None:
    obs = await execute(ToolRegistry(), call("anything"))
    assert obs.is_error and "No tools are available" in obs.output


async def test_missing_and_unknown_arguments_are_named(registry: ToolRegistry) -> None:
    obs = await execute(registry, call("weather", {"town": "Paris"}))
    assert obs.is_error
    assert "Missing required argument(s): city." in obs.output
    assert "Unknown argument(s): town." in obs.output
    assert json.dumps(registry.get("weather").parameters) in obs.output  # type: ignore[union-attr]


async def test_type_error_names_argument_and_given_value(registry: ToolRegistry) -> None:
    obs = await execute(registry, call("add", {"a": "twelve", "b": 1}))
    assert obs.is_error
    assert "- a: Input should be a valid integer" in obs.output
    assert "(got 'twelve')" in obs.output
    assert '"type": "integer"' in obs.output
    assert "pydantic" not in obs.output.lower()  # no link / full dump


async def test_broken_json_quotes_raw_input_and_schema(registry: ToolRegistry) -> None:
    raw = '{"a": 1, "b": ' + "9" * 500
    obs = await execute(registry,
        call("add", raw_arguments=raw, arguments_error="Expecting ',' delimiter")
    )
    assert obs.is_error
    assert "not valid JSON" in obs.output
    assert "Expecting ',' delimiter" in obs.output
    assert '{"a": 1, "b": 999' in obs.output
    assert "9" * 400 not in obs.output  # shortened
    assert '"required": ["a", "b"]' in obs.output


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Paris", "Paris: 20 celsius"),
        ('"Paris"', "Paris: 20 celsius"),
        ("  'Rome'  ", "Rome: 20 celsius"),
        ("北京", "北京: 20 celsius"),
    ],
)
async def test_bare_string_goes_to_single_required_parameter(
    registry: ToolRegistry, raw: str, expected: str
) -> None:
    obs = await execute(registry, call("weather", raw_arguments=raw))
    assert not obs.is_error, obs.output
    assert obs.output == expected


async def test_bare_json_value_is_decoded() -> None:
    def total(numbers: list[int]) -> int:
        """Sum."""
        return sum(numbers)

    def double(x: int = 1) -> int:
        """Double (a single optional parameter)."""
        return 2 * x

    registry = ToolRegistry([total, double])
    assert (await execute(registry, call("total", raw_arguments="[1, 2, 3]"))).output == "6"
    assert (await execute(registry, call("double", raw_arguments="21"))).output == "42"


async def test_raw_json_object_used_when_arguments_empty(registry: ToolRegistry) -> None:
    obs = await execute(registry, call("add", raw_arguments='{"a": 1, "b": 2}'))
    assert obs.output == "3"


async def test_bare_string_for_multi_parameter_tool_explains_object(
    registry: ToolRegistry,
) -> None:
    obs = await execute(registry, call("add", raw_arguments="1 and 2"))
    assert obs.is_error
    assert "expects a JSON object" in obs.output
    assert "a (required), b (required)" in obs.output


async def test_empty_arguments_for_required_parameters(registry: ToolRegistry) -> None:
    obs = await execute(registry, call("add"))
    assert obs.is_error and "Missing required argument(s): a, b." in obs.output


# -- errors the tool caused ----------------------------------------------------------


async def test_tool_exception_becomes_observation() -> None:
    def explode(x: int) -> int:
        """Explode."""
        raise ValueError("bad value")

    obs = await execute(ToolRegistry([explode]), call("explode", {"x": 1}))
    assert obs.is_error
    assert obs.output == "Error executing tool 'explode': ValueError: bad value"


async def test_async_tool_exception_becomes_observation() -> None:
    async def explode() -> None:
        """Explode."""
        raise KeyError("k")

    obs = await execute(ToolRegistry([explode]), call("explode"))
    assert obs.is_error and obs.output == "Error executing tool 'explode': KeyError: 'k'"


async def test_tool_error_message_verbatim() -> None:
    def picky(x: int) -> int:
        """Picky."""
        raise ToolError("x must be even; try x=2.")

    obs = await execute(ToolRegistry([picky]), call("picky", {"x": 1}))
    assert obs.is_error and obs.output == "x must be even; try x=2."


async def test_tool_raising_timeout_error_is_not_our_timeout() -> None:
    def slow_network() -> None:
        """Raises TimeoutError itself."""
        raise TimeoutError("upstream")

    obs = await execute(ToolRegistry([slow_network]), call("slow_network"))
    assert obs.output == "Error executing tool 'slow_network': TimeoutError: upstream"


async def test_async_tool_timeout() -> None:
    @tool(timeout=0.05)
    async def hang() -> None:
        """Hang."""
        await asyncio.sleep(30)

    obs = await execute(ToolRegistry([hang]), call("hang"))
    assert obs.is_error
    assert obs.output == "Tool 'hang' timed out after 0.05 s."


async def test_sync_tool_default_timeout() -> None:
    release = threading.Event()

    def block() -> str:
        """Block until released."""
        release.wait(10)
        return "done"

    try:
        obs = await execute(ToolRegistry([block], default_timeout=0.05), call("block"))
    finally:
        release.set()  # the worker thread cannot be killed; let it finish
    assert obs.is_error and obs.output == "Tool 'block' timed out after 0.05 s."


async def test_unprintable_result_becomes_error() -> None:
    class Weird:
        def __str__(self) -> str:
            raise RuntimeError("no str")

    def weird() -> Any:
        """Weird."""
        return Weird()

    obs = await execute(ToolRegistry([weird]), call("weird"))
    assert obs.is_error and "cannot be shown" in obs.output


@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt, GeneratorExit,
                                    asyncio.CancelledError])
@pytest.mark.parametrize("where", ["__str__", "__len__", "field"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_result_that_raises_anything_while_shown_is_the_tools_error(
        raised: type[BaseException], where: str, kind: str) -> None:
    """Formatting a result is part of the call: it cannot take the run down."""
    class Hostile:
        def __str__(self) -> str:
            raise raised("str")

        def __len__(self) -> int:
            raise raised("len")

    def make() -> Any:
        return _Lazy(raised) if where == "field" else Hostile()

    if kind == "sync":
        def produce() -> Any:
            """Produce."""
            return make()
    else:
        async def produce() -> Any:  # type: ignore[misc]
            """Produce."""
            return make()

    from miniagent import Agent, ScriptedModel

    model = ScriptedModel(["Action: produce\nAction Input: {}", "Final Answer: survived"])
    result = Agent(model=model, tools=[produce]).run("go")
    assert (result.status, result.final_answer) == ("completed", "survived")
    (observation,) = result.steps[0].observations
    assert observation.is_error


class _Lazy:
    """A result with a field (read by the formatter: a dataclass-like ``__dict__``) that
    raises when it is read."""

    def __init__(self, raised: type[BaseException]) -> None:
        self._raised = raised

    def __getattribute__(self, name: str) -> Any:
        if name in ("__dict__", "model_dump", "__dataclass_fields__"):
            raise object.__getattribute__(self, "_raised")(name)
        return object.__getattribute__(self, name)

    def __str__(self) -> str:
        raise object.__getattribute__(self, "_raised")("str")


async def test_cancellation_propagates() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        """Forever."""
        started.set()
        await asyncio.sleep(30)

    task = asyncio.create_task(execute(ToolRegistry([forever]), call("forever")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- execute_all ---------------------------------------------------------------------


async def test_execute_all_keeps_call_order(registry: ToolRegistry) -> None:
    calls = [
        ToolCall(id="1", name="add", arguments={"a": 1, "b": 1}),
        ToolCall(id="2", name="missing"),
        ToolCall(id="3", name="search_docs", arguments={"query": "z", "limit": 1}),
        ToolCall(id="4", name="weather", raw_arguments="Oslo"),
    ]
    observations = await execute_all(registry, calls)
    assert [o.call_id for o in observations] == ["1", "2", "3", "4"]
    assert [o.is_error for o in observations] == [False, True, False, False]
    assert observations[0].output == "2"
    assert observations[3].output == "Oslo: 20 celsius"
    assert await execute_all(registry, []) == []


async def test_execute_all_runs_async_tools_concurrently() -> None:
    arrived: list[str] = []
    both_here = asyncio.Event()

    async def meet(who: str) -> str:
        """Wait until both calls have started; deadlocks if run one after the other."""
        arrived.append(who)
        if len(arrived) == 2:
            both_here.set()
        await both_here.wait()
        return who

    registry = ToolRegistry([meet], default_timeout=5.0)
    calls = [ToolCall(id=str(i), name="meet", arguments={"who": w}) for i, w in enumerate("ab")]
    observations = await execute_all(registry, calls)
    assert [o.output for o in observations] == ["a", "b"]
    assert not any(o.is_error for o in observations)


async def test_execute_all_runs_sync_tools_in_parallel_threads() -> None:
    barrier = threading.Barrier(2, timeout=5.0)

    def meet(who: str) -> str:
        """Both threads must reach the barrier, or it breaks after 5 s."""
        barrier.wait()
        return who

    registry = ToolRegistry([meet])
    calls = [ToolCall(id=str(i), name="meet", arguments={"who": w}) for i, w in enumerate("xy")]
    observations = await execute_all(registry, calls)
    assert [(o.output, o.is_error) for o in observations] == [("x", False), ("y", False)]


# -- inline sync tools ---------------------------------------------------------------------


async def test_an_inline_tool_runs_on_the_event_loop_and_a_default_one_on_a_worker() -> None:
    def where() -> str:
        """The thread it runs on."""
        return threading.current_thread().name

    registry = ToolRegistry([tool(inline=True, name="here")(where), tool(name="there")(where)])
    here = await execute(registry, ToolCall(id="1", name="here", arguments={}))
    there = await execute(registry, ToolCall(id="2", name="there", arguments={}))
    assert here.output == threading.current_thread().name and not here.is_error
    assert there.output == "miniagent-worker" and not there.is_error


async def test_an_inline_tool_fails_as_a_threaded_one_does_and_keeps_its_context_to_itself(
) -> None:
    import contextvars

    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="caller's")

    @tool(inline=True)
    def explode(text: str) -> str:
        """Set a context variable, then fail."""
        mark.set("the tool's")
        raise ValueError(f"no {text}")

    @tool(inline=True)
    def leave() -> None:
        """Stop the interpreter (a tool's own exit is its failure, not the run's)."""
        raise SystemExit(3)

    registry = ToolRegistry([explode, leave])
    failed = await execute(registry, ToolCall(id="1", name="explode", arguments={"text": "水"}))
    assert failed.is_error and failed.output == "Error executing tool 'explode': ValueError: no 水"
    assert mark.get() == "caller's"
    exited = await execute(registry, ToolCall(id="2", name="leave", arguments={}))
    assert exited.is_error and "SystemExit" in exited.output


def test_inline_is_kept_by_every_way_of_making_a_tool_and_refused_for_async_functions(
) -> None:
    assert not add.inline and tool(inline=True)(add).inline
    assert add.with_options(inline=True).inline and not add.with_options().inline
    schema_tool = Tool.from_schema(name="echo", description="Echo.", inline=True,
                                   parameters={"type": "object", "properties": {}},
                                   fn=lambda args: args)
    assert schema_tool.inline
    with pytest.raises(ToolDefinitionError, match="inline=True is for sync functions"):
        tool(inline=True)(search.fn)
    with pytest.raises(ToolDefinitionError, match="inline=True is for sync functions"):
        search.with_options(inline=True)

"""Hostile model output through the whole run path, with both stores: surrogates, deep nesting,
huge numbers, thousands of calls. Every run ends with an explicit status and never raises."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miniagent import Agent, InMemoryStore, Limits, ScriptedModel, SQLiteStore, tool
from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.store.base import CheckpointStore

STATUSES = {"completed", "max_steps", "budget_exceeded", "timeout", "loop_detected", "error",
            "awaiting_approval"}


@tool
def echo(value: Any = None) -> str:
    """Echo the value."""
    return f"got {json.dumps(value, ensure_ascii=False)[:50]}"


def stores(tmp_path: Path) -> list[CheckpointStore]:
    return [InMemoryStore(), SQLiteStore(tmp_path / "s.db")]


def native(*calls: tuple[str, str]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(calls)]}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_lone_surrogates_are_stored_as_replacement_characters(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind == "sqlite"]
    script = ['Action: echo\nAction Input: {"value": "\\ud800 x"}', "Final Answer: \ud800 ok"]
    result = Agent(model=ScriptedModel(script), tools=[echo], store=store).run("q \udcff")
    assert (result.status, result.final_answer) == ("completed", "\ufffd ok")
    loaded = store.load(result.session_id)
    assert loaded.question == "q \ufffd"
    assert loaded.steps[0].tool_calls[0].arguments == {"value": "\ufffd x"}
    assert json.dumps(loaded.to_dict(), ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_deeply_nested_arguments_and_huge_numbers_become_error_observations(
        tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind == "sqlite"]
    deep = "[" * 900 + "]" * 900
    huge = "9" * 400
    script = [native(("echo", f'{{"value": {deep}}}')), native(("echo", f'{{"value": {huge}}}')),
              native(("echo", f'{{"value": {huge}}}')), {"content": "done"}]
    model = ScriptedModel(script, tool_mode="native")
    result = Agent(model=model, tools=[echo], store=store).run("q")
    assert result.status == "completed"
    first, second = result.steps[0].observations[0], result.steps[1].observations[0]
    assert first.is_error and "nested deeper than 64" in first.output
    assert not second.is_error and second.output.startswith("got 999")
    assert store.load(result.session_id).status == "completed"


def test_thousands_of_calls_in_one_reply_are_capped_and_the_model_told() -> None:
    running = 0
    most = 0

    @tool
    async def work(n: int) -> str:
        """Do some work."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001)
        running -= 1
        return f"done {n}"

    reply = native(*[("work", json.dumps({"n": i})) for i in range(2000)])
    model = ScriptedModel([reply, {"content": "finished"}], tool_mode="native")
    agent = Agent(model=model, tools=[work],
                  limits=Limits(max_calls_per_step=20, tool_concurrency=4))
    result = agent.run("q")
    assert result.status == "completed"
    assert len(result.steps[0].calls) == 20 and result.steps[0].dropped_calls == 1980
    assert most <= 4
    tool_messages = [m for m in model.requests[1].messages if m["role"] == "tool"]
    assert len(tool_messages) == 20
    assert "Only the first 20 of the 2,000 tool calls" in tool_messages[-1]["content"]
    assert len(model.requests[1].messages[-21]["tool_calls"]) == 20  # the history matches


def test_the_step_is_saved_before_a_person_is_asked(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    seen: list[str] = []

    @tool(requires_approval=True)
    def pay(n: int) -> str:
        """Pay."""
        return "paid"

    def approver(pending: Any) -> bool:
        (row,) = SQLiteStore(tmp_path / "s.db").list()
        saved = SQLiteStore(tmp_path / "s.db").load(row.session_id)
        seen.append(saved.steps[-1].calls[0].state)
        return True

    script = ['Action: pay\nAction Input: {"n": 1}', "Final Answer: ok"]
    result = Agent(model=ScriptedModel(script), tools=[pay], store=store,
                   approver=approver).run("q")
    assert result.status == "completed" and seen == ["awaiting_approval"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20,
)
hostile_text = st.one_of(
    st.text(), st.just("\ud800"), st.just("\x1b]52;c;aGk=\x07"), st.just("[" * 2000),
    st.just("9" * 5000), st.builds(lambda v: json.dumps(v), json_values),
    st.builds(lambda n: "Action: echo\nAction Input: " + "{\"value\": " * n + "1" + "}" * n,
              st.integers(0, 1500)),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts=st.lists(hostile_text, min_size=1, max_size=4),
       args=st.lists(st.one_of(hostile_text, st.builds(json.dumps, json_values)), max_size=3))
def test_hostile_values_through_the_whole_run_always_end_with_a_status(
        tmp_path: Path, texts: list[str], args: list[str]) -> None:
    script: list[Any] = list(texts)
    script.insert(1, native(*[("echo", a) for a in args]) if args else "Final Answer: x")
    for store in stores(tmp_path):
        for mode in ("react", "native"):
            model = ScriptedModel(list(script), tool_mode=mode)  # type: ignore[arg-type]
            result = Agent(model=model, tools=[echo], store=store,
                           limits=Limits(max_steps=4)).run(texts[0])
            assert result.status in STATUSES
            assert store.load(result.session_id).status == result.status


def test_a_tool_exiting_or_interrupting_becomes_an_error_observation() -> None:
    import sys

    @tool
    def quits() -> str:
        """Exit the process."""
        sys.exit(3)

    @tool
    async def interrupts() -> str:
        """Raise KeyboardInterrupt."""
        raise KeyboardInterrupt

    @tool
    async def cancels_itself() -> str:
        """Raise CancelledError of its own."""
        raise asyncio.CancelledError

    script = [native(("quits", "{}"), ("interrupts", "{}"), ("cancels_itself", "{}")),
              {"content": "survived"}]
    store = InMemoryStore()
    result = Agent(model=ScriptedModel(script, tool_mode="native"),
                   tools=[quits, interrupts, cancels_itself], store=store).run("q")
    assert (result.status, result.final_answer) == ("completed", "survived")
    outputs = [o.output for o in result.steps[0].observations]
    assert all(o.is_error for o in result.steps[0].observations)
    assert "SystemExit: 3" in outputs[0] and "KeyboardInterrupt" in outputs[1]
    assert "CancelledError" in outputs[2]
    assert store.load(result.session_id).status == "completed"


def _stubborn_tool(finished: list[str], *, timeout: float | None = None) -> Any:
    @tool(timeout=timeout)
    async def stubborn() -> str:
        """Ignore cancellation for a long while."""
        for _ in range(200):  # bounded: 20 s at most
            try:
                await asyncio.sleep(0.1)
            except asyncio.CancelledError:
                continue
        finished.append("done")
        return "late"

    return stubborn


def test_the_run_deadline_holds_against_a_tool_that_swallows_cancellation() -> None:
    finished: list[str] = []
    script = [native(("stubborn", "{}")), {"content": "never"}]
    agent = Agent(model=ScriptedModel(script, tool_mode="native"),
                  tools=[_stubborn_tool(finished)], limits=Limits(timeout=0.3))
    result = agent.run("q")
    assert result.status == "timeout" and finished == []  # returned while the tool ran on


def test_a_tool_timeout_holds_against_a_tool_that_swallows_cancellation() -> None:
    finished: list[str] = []
    script = [native(("stubborn", "{}")), {"content": "gave up on it"}]
    agent = Agent(model=ScriptedModel(script, tool_mode="native"),
                  tools=[_stubborn_tool(finished, timeout=0.2)])
    result = agent.run("q")
    assert (result.status, result.final_answer) == ("completed", "gave up on it")
    assert "timed out after 0.2 s" in result.steps[0].observations[0].output
    assert finished == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_lone_surrogate_in_any_field_of_the_reply_is_cleaned_where_it_enters(
        tmp_path: Path, kind: str) -> None:
    """In the call id, the model name and the finish reason too (not only the texts): the run
    completes, and its session, JSONL trace and OTLP spans can all be written."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from miniagent.core.models.describe import describe_model
    from miniagent.core.trace.jsonl import JsonlTracer
    from miniagent.observe.otel import OtelTracer

    body = {"id": "r\ud800", "model": "m\udfff", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "tool_calls\ud800", "message": {
            "role": "assistant", "content": None, "reasoning_content": "why\udc00",
            "tool_calls": [{"id": "call\ud800x", "type": "function", "function": {
                "name": "echo", "arguments": '{"value": "hi"}'}}]}}]}

    class Raw(ScriptedModel):
        async def generate(self, request: Any, **options: Any) -> Any:
            reply = await super().generate(request, **options)
            return normalize_completion(body) if reply.content == "RAW" else reply

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    model = Raw(["RAW", "done"], tool_mode="native")
    tracer = JsonlTracer(tmp_path / "t.jsonl")
    agent = Agent(model=model, tools=[echo], store=stores(tmp_path)[kind == "sqlite"])
    agent.subscribe(tracer)
    agent.subscribe(OtelTracer(model=describe_model(model), tracer_provider=provider,
                               capture_content=True))
    result = agent.run("echo")
    tracer.close()
    assert (result.status, result.final_answer) == ("completed", "done")
    (record,) = result.steps[0].calls
    assert record.call.id == "call\ufffdx" and record.observation is not None
    agent.session(result.session_id)  # it was saved, and loads
    (tmp_path / "t.jsonl").read_text(encoding="utf-8")
    assert spans.get_finished_spans()

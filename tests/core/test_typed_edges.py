"""Typed results at their edges (issue 35, item 1, reviewed): a hostile output schema is
refused with a bounded cost, a cut-off answer never completes a typed run, a ``final_result``
call beside other calls or text, a fenced or thinking ``response_format`` reply, a bounded
repair note, and CJK text kept as it is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from miniagent import Agent, Aids, Limits, OpenAICompatibleModel, ScriptedModel
from miniagent.core.errors import UserError
from miniagent.core.runtime.output import FINAL_RESULT
from miniagent.testing.stub_server import StubServer


class Invoice(BaseModel):
    number: str
    total: float


def model(stub: StubServer, **options: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=stub.base_url, model="m", max_retries=0, **options)


def _chain(depth: int) -> dict[str, Any]:
    """A schema whose definitions each refer twice to the next: 2**depth nodes expanded."""
    defs = {f"d{i}": {"type": "object", "properties": {
        "a": {"$ref": f"#/$defs/d{i + 1}"}, "b": {"$ref": f"#/$defs/d{i + 1}"}}}
            for i in range(depth)}
    defs[f"d{depth}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def _deep(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(("schema", "words"), [
    (_chain(40), "expands"),
    (_deep(200), "nests deeper"),
    ({"enum": [f"v{i}" for i in range(100_000)]}, "characters"),
])
def test_a_hostile_output_schema_is_refused_clearly(schema: dict[str, Any], words: str) -> None:
    with pytest.raises(UserError, match=f"output_type.*{words}"):
        Agent(model=ScriptedModel([]), output_type=schema)


def test_a_hostile_output_schema_per_run_is_refused_before_any_request() -> None:
    with StubServer(["{}"]).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react"))
        with pytest.raises(UserError, match="expands"):
            agent.run("q", output_type=_chain(40))
    assert stub.requests == []


def test_a_recursive_output_schema_builds_a_grammar_and_validates() -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["name"]}}, "$ref": "#/$defs/node"}
    answer = '{"name": "a", "kids": [{"name": "b"}]}'
    with StubServer([f"Thought: done\nFinal Answer: {answer}"]).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react", grammar_field="grammar"),
                      output_type=tree)
        result = agent.run("q")
    assert result.status == "completed" and result.output == json.loads(answer)
    assert "answer-value" in stub.requests[0]["grammar"]


_WHOLE = {"number": "A-7", "total": 1500}


def lookup(number: str) -> str:
    """Look an invoice up.

    Args:
        number: The invoice number.
    """
    return "total 1500"


def test_a_final_result_call_cut_off_by_max_tokens_does_not_end_the_run() -> None:
    cut = {"tool_calls": [{"name": FINAL_RESULT, "arguments": {"number": "A-7", "total": 15}}],
           "content": None, "finish_reason": "length"}
    whole = {"tool_calls": [{"name": FINAL_RESULT, "arguments": _WHOLE}], "content": None}
    with StubServer([cut, whole]).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native"), output_type=Invoice)
        result = agent.run("Read the invoice")
    assert (result.status, result.output) == ("completed", Invoice(**_WHOLE))
    told = stub.requests[1]["messages"][-1]
    assert told["role"] == "tool" and "cut off" in told["content"]


@pytest.mark.parametrize("options", [{"tool_mode": "react"},
                                     {"tool_mode": "native", "response_format": True}])
def test_an_answer_cut_off_by_max_tokens_never_validates(options: dict[str, Any]) -> None:
    text = json.dumps({"number": "A-7", "total": 15})
    if options["tool_mode"] == "react":
        text = f"Thought: done\nFinal Answer: {text}"
    replies = [{"content": text, "finish_reason": "length"},
               {"content": text.replace("15", "1500")}]
    with StubServer(replies).run_in_thread() as stub:
        result = Agent(model=model(stub, **options), output_type=Invoice).run("q")
    assert (result.status, result.output) == ("completed", Invoice(**_WHOLE))
    assert len(stub.requests) == 2


def test_a_final_result_beside_other_calls_waits_for_their_results() -> None:
    """The answer given with a lookup it has not seen is not taken: the lookup runs, the
    model is told to give the answer alone, and its next answer ends the run."""
    seen: list[str] = []

    def lookup(number: str) -> str:
        """Look an invoice up.

        Args:
            number: The invoice number.
        """
        seen.append(number)
        return "A-7: total 1500"

    both = {"tool_calls": [{"name": "lookup", "arguments": {"number": "A-7"}},
                           {"name": FINAL_RESULT, "arguments": {"number": "A-7", "total": 1}}],
            "content": None}
    alone = {"tool_calls": [{"name": FINAL_RESULT, "arguments": _WHOLE}], "content": None}
    with StubServer([both, alone]).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native"), tools=[lookup],
                      output_type=Invoice)
        result = agent.run("Read the invoice")
    assert (result.status, result.output) == ("completed", Invoice(**_WHOLE))
    assert seen == ["A-7"]
    told = {m.get("tool_call_id"): m["content"] for m in stub.requests[1]["messages"]
            if m["role"] == "tool"}
    assert "A-7: total 1500" in told.values()
    assert any(FINAL_RESULT in text and "alone" in text for text in told.values())


def test_a_final_result_with_text_keeps_the_json_as_the_answer() -> None:
    reply = {"tool_calls": [{"name": FINAL_RESULT, "arguments": _WHOLE}],
             "content": "Here is the invoice."}
    with StubServer([reply]).run_in_thread() as stub:
        result = Agent(model=model(stub, tool_mode="native"), output_type=Invoice).run("q")
    assert result.output == Invoice(**_WHOLE)
    assert json.loads(result.final_answer or "") == _WHOLE


@pytest.mark.parametrize("content", [
    '```json\n{"number": "A-7", "total": 1500}\n```',
    '<think>an invoice, so JSON</think>\n{"number": "A-7", "total": 1500}',
    '<think>hm</think>```json\n{"number": "A-7", "total": 1500}\n```',
])
def test_a_response_format_reply_in_a_fence_or_after_thinking_validates(content: str) -> None:
    with StubServer([content]).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native", response_format=True),
                      output_type=Invoice)
        result = agent.run("q")
    assert (result.status, result.output) == ("completed", Invoice(**_WHOLE))
    assert len(stub.requests) == 1


def test_the_repair_note_is_bounded_and_says_what_is_wrong() -> None:
    fields = {f"f{i}": {"enum": [f"城市{j}" for j in range(300)]} for i in range(20)}
    schema = {"type": "object", "properties": fields, "required": list(fields)}
    wrong = json.dumps({f"f{i}": "x" * 5000 for i in range(20)})
    fits = json.dumps({f"f{i}": "城市1" for i in range(20)}, ensure_ascii=False)
    replies = [f"Thought: done\nFinal Answer: {wrong}", f"Thought: fixed\nFinal Answer: {fits}"]
    with StubServer(replies).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react"), output_type=schema)
        result = agent.run("q")
    assert result.status == "completed" and result.output["f0"] == "城市1"
    note = stub.requests[1]["messages"][-1]["content"]
    assert len(note) < 3000, len(note)
    assert "answer.f0" in note and "and 15 more" in note
    assert "城市" in note and "\\u" not in note  # CJK as it is, not escaped


def test_on_event_run_finished_carries_the_same_output_as_the_result() -> None:
    events: list[Any] = []
    replies = ['Thought: done\nFinal Answer: {"number": "A-7", "total": 1500}']
    with StubServer(replies).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react"), output_type=Invoice)
        result = agent.run("q", on_event=events.append)
    finished = [e for e in events if type(e).__name__ == "RunFinished"]
    assert [e.result.output for e in finished] == [result.output] == [Invoice(**_WHOLE)]


def test_a_fork_of_a_run_typed_on_its_own_is_still_typed_when_resumed() -> None:
    replies = ['Thought: done\nFinal Answer: {"number": "A-7"}',
               'Thought: fixed\nFinal Answer: {"number": "A-7", "total": 1500}',
               'Thought: again\nFinal Answer: {"number": "B-2", "total": 2}']
    with StubServer(replies).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="react"))
        first = agent.run("q", output_type=Invoice)
        child = agent.fork(first.session_id, at_step=1)
        resumed = agent.resume(child)
    assert first.output == Invoice(**_WHOLE)
    assert (resumed.status, resumed.output) == ("completed", {"number": "B-2", "total": 2})
    assert "JSON Schema" in stub.requests[2]["messages"][0]["content"]
    assert agent.session(first.session_id).final_answer == first.final_answer


def test_a_final_result_call_at_max_steps_is_the_answer_at_the_limit() -> None:
    replies = [{"tool_calls": [{"name": "lookup", "arguments": {"number": "A-7"}}],
                "content": None},
               {"tool_calls": [{"name": FINAL_RESULT, "arguments": _WHOLE}], "content": None}]
    with StubServer(replies).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native"), tools=[lookup],
                      output_type=Invoice, limits=Limits(max_steps=1))
        result = agent.run("q")
    assert result.status == "max_steps"
    assert json.loads(result.final_answer or "") == _WHOLE


def test_a_final_result_call_is_no_way_around_a_required_tool_call() -> None:
    guess = {"tool_calls": [{"name": FINAL_RESULT, "arguments": {"number": "A-7", "total": 1}}],
             "content": None}
    look = {"tool_calls": [{"name": "lookup", "arguments": {"number": "A-7"}}], "content": None}
    answer = {"tool_calls": [{"name": FINAL_RESULT, "arguments": _WHOLE}], "content": None}
    with StubServer([guess, look, answer]).run_in_thread() as stub:
        agent = Agent(model=model(stub, tool_mode="native"), tools=[lookup],
                      output_type=Invoice, aids=Aids(tool_choice="required"))
        result = agent.run("q")
    assert (result.status, result.output) == ("completed", Invoice(**_WHOLE))
    assert len(stub.requests) == 3

"""The event-stream reader and the streamed-completion accumulator, fed by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.models.sse import SSEError, SSEReader
from miniagent.core.models.streaming import StreamAccumulator, StreamIncomplete
from miniagent.core.protocol.react import STOP_WORDS
from miniagent.testing.stub_server import (
    LLAMA_CPP,
    OLLAMA,
    REPEATED_NAME,
    SHARED_INDEX,
    VLLM,
    StreamStyle,
    stream_events,
)

# -- SSE ----------------------------------------------------------------------------------


def test_sse_events_split_anywhere_give_the_same_data() -> None:
    stream = (b": ping\r\n\r\ndata: {\"a\": 1}\r\n\r\nevent: x\ndata: line one\ndata: line two\n\n"
              b"id: 7\rdata:[DONE]\r\r")
    whole = SSEReader().feed(stream)
    assert whole == ['{"a": 1}', "line one\nline two", "[DONE]"]
    for size in (1, 2, 3, 7):
        reader = SSEReader()
        parts = [stream[i:i + size] for i in range(0, len(stream), size)]
        assert [e for part in parts for e in reader.feed(part)] == whole


def test_sse_keeps_multibyte_text_split_across_pieces() -> None:
    data = 'data: {"c": "北京"}\n\n'.encode()
    reader = SSEReader()
    events = [e for i in range(len(data)) for e in reader.feed(data[i:i + 1])]
    assert [json.loads(e)["c"] for e in events] == ["北京"]


def test_sse_close_gives_an_event_the_stream_ended_in() -> None:
    reader = SSEReader()
    assert reader.feed(b"data: last") == []
    assert reader.close() == ["last"]


def test_sse_refuses_an_endless_line() -> None:
    reader = SSEReader(max_event_bytes=100)
    with pytest.raises(SSEError):
        for _ in range(20):
            reader.feed(b"data: " + b"x" * 10)


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",),  # UTF-8 text
                                               blacklist_characters="\r\n"), max_size=20),
                max_size=5), st.integers(1, 9))
def test_sse_any_data_any_split(values: list[str], size: int) -> None:
    stream = "".join(f"data: {v}\n\n" for v in values).encode()
    reader = SSEReader()
    got = [e for i in range(0, len(stream), size) for e in reader.feed(stream[i:i + size])]
    got += reader.close()
    assert got == values


# -- the accumulator, against every stub style ---------------------------------------------

CALLS = [
    {"id": "call_a", "type": "function",
     "function": {"name": "weather", "arguments": '{"city": "北京"}'}},
    {"id": "call_b", "type": "function",
     "function": {"name": "calc", "arguments": '{"expression": "2*(3+4)"}'}},
]
BODY: dict[str, Any] = {
    "id": "x", "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls",
                 "message": {"role": "assistant", "content": "Thought: two lookups",
                             "tool_calls": CALLS}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7},
}


def _accumulate(events: list[str], **options: Any) -> tuple[StreamAccumulator, list[Any]]:
    deltas: list[Any] = []
    acc = StreamAccumulator(on_delta=lambda channel, text: deltas.append((channel, text)),
                            **options)
    for data in events:
        if acc.feed(data):
            break
    return acc, deltas


@pytest.mark.parametrize("style", [VLLM, LLAMA_CPP, OLLAMA, REPEATED_NAME, SHARED_INDEX,
                                   StreamStyle(no_index=True), StreamStyle(text_piece=1,
                                   argument_piece=1, arguments_with_head=True)],
                         ids=["vllm", "llama.cpp", "ollama", "repeated-name", "shared-index",
                              "no-index", "char-by-char"])
def test_every_style_rebuilds_the_same_calls(style: StreamStyle) -> None:
    acc, deltas = _accumulate(stream_events(BODY, style, with_usage=True))
    response = normalize_completion(acc.body())
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "weather", {"city": "北京"}), ("call_b", "calc", {"expression": "2*(3+4)"})]
    assert response.content == "Thought: two lookups"
    assert "".join(t for c, t in deltas if c == "content") == "Thought: two lookups"
    assert response.usage.prompt_tokens == 12 and response.usage.completion_tokens == 7


def test_text_comes_as_deltas_in_order_and_null_content_is_nothing() -> None:
    events = [json.dumps({"choices": [{"delta": {"content": None, "role": "assistant"}}]}),
              json.dumps({"choices": [{"delta": {"content": "Hel"}}]}),
              json.dumps({"choices": [{"delta": {}}]}),
              json.dumps({"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}),
              "[DONE]"]
    acc, deltas = _accumulate(events)
    assert deltas == [("content", "Hel"), ("content", "lo")]
    assert normalize_completion(acc.body()).content == "Hello"


def test_a_new_id_at_the_same_index_is_a_new_call_and_its_name_is_not_doubled() -> None:
    def piece(**call: Any) -> str:
        return json.dumps({"choices": [{"delta": {"tool_calls": [call]}}]})

    events = [
        piece(index=0, id="c1", function={"name": "add", "arguments": '{"a": '}),
        piece(index=0, id="c1", function={"name": "add", "arguments": "1}"}),
        piece(index=0, id="c2", function={"name": "add", "arguments": '{"a": 2}'}),
        piece(index=0, function={"arguments": ""}),
        json.dumps({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]
    acc, _ = _accumulate(events)
    calls = normalize_completion(acc.body()).tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "add", {"a": 1}), ("c2", "add", {"a": 2})]


def test_arguments_of_the_first_chunk_count_and_an_object_is_encoded_once() -> None:
    events = [
        json.dumps({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"x"'}}]}}]}),
        json.dumps({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": ": 5}"}}]}}]}),
        json.dumps({"choices": [{"delta": {"tool_calls": [
            {"index": 1, "id": "d", "function": {"name": "g", "arguments": {"y": "中"}}}]}}]}),
        json.dumps({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]
    acc, _ = _accumulate(events)
    calls = normalize_completion(acc.body()).tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("f", {"x": 5}), ("g", {"y": "中"})]


def test_a_stop_word_cuts_the_text_and_ends_the_stream() -> None:
    text = 'Thought: t\nAction: calc\nAction Input: {"e": 1}\nObservation: 42\nFinal Answer: 42'
    body = {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}
    events = stream_events(body, StreamStyle(text_piece=2), with_usage=False)
    acc, deltas = _accumulate(events, stop=STOP_WORDS)
    assert acc.stopped
    shown = "".join(t for _, t in deltas)
    assert shown == 'Thought: t\nAction: calc\nAction Input: {"e": 1}'
    assert "\nObs" not in shown  # the start of the stop word was held back, never shown
    assert normalize_completion(acc.body()).content == shown


def test_text_held_back_for_a_possible_stop_word_is_shown_when_it_is_not_one() -> None:
    events = [json.dumps({"choices": [{"delta": {"content": "a\nObs"}}]}),
              json.dumps({"choices": [{"delta": {"content": "cure"}, "finish_reason": "stop"}]})]
    acc, deltas = _accumulate(events, stop=STOP_WORDS)
    assert deltas == [("content", "a"), ("content", "\nObscure")]
    assert normalize_completion(acc.body()).content == "a\nObscure"


def test_reasoning_deltas_are_their_own_channel_and_kept() -> None:
    events = [json.dumps({"choices": [{"delta": {"reasoning_content": "think "}}]}),
              json.dumps({"choices": [{"delta": {"reasoning": "more"}}]}),
              json.dumps({"choices": [{"delta": {"content": "42"}, "finish_reason": "stop"}]})]
    acc, deltas = _accumulate(events)
    assert deltas == [("reasoning", "think "), ("reasoning", "more"), ("content", "42")]
    assert acc.body()["choices"][0]["message"]["reasoning_content"] == "think more"


@pytest.mark.parametrize(("style", "why"), [
    (StreamStyle(break_after=3, done=False), "ended before its last chunk"),
    (StreamStyle(drop_calls=True), "promised tool calls"),
])
def test_incomplete_streams_are_refused(style: StreamStyle, why: str) -> None:
    events = stream_events(BODY, style, with_usage=False)
    if style.break_after is not None:
        events = events[: style.break_after]
    acc, _ = _accumulate(events)
    with pytest.raises(StreamIncomplete, match=why):
        acc.body()


def test_an_error_event_or_a_non_json_event_is_incomplete() -> None:
    for bad in ('{"error": {"message": "out of memory"}}', "{not json"):
        acc, _ = _accumulate([json.dumps({"choices": [{"delta": {"content": "a"}}]}), bad])
        with pytest.raises(StreamIncomplete):
            acc.body()

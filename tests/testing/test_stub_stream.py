"""The stub server's streams as bytes on the wire: an event stream a plain HTTP client can read."""

from __future__ import annotations

import http.client
import json
from typing import Any

from miniagent.testing.stub_server import OLLAMA, StreamStyle, StubServer


def _post(base_url: str, body: dict[str, Any]) -> tuple[int, str, str]:
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        conn.close()


def test_a_stream_request_gets_server_sent_events_ending_in_done() -> None:
    with StubServer(["Hi there"], stream_style=StreamStyle(text_piece=3)).run_in_thread() as stub:
        status, kind, text = _post(stub.base_url, {"messages": [], "stream": True,
                                                   "stream_options": {"include_usage": True}})
    assert (status, kind) == (200, "text/event-stream")
    events = [line.removeprefix("data: ") for line in text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                   if c["choices"]) == "Hi there"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 10
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_ollama_style_sends_the_calls_whole_without_index() -> None:
    reply = {"content": None, "tool_calls": [{"name": "a", "arguments": {"x": 1}},
                                             {"name": "b", "arguments": {}}]}
    with StubServer([reply], stream_style=OLLAMA).run_in_thread() as stub:
        _, _, text = _post(stub.base_url, {"messages": [], "stream": True})
    chunks = [json.loads(e.removeprefix("data: ")) for e in text.split("\n\n")
              if e and e != "data: [DONE]"]
    with_calls = [c for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    assert len(with_calls) == 1
    calls = with_calls[0]["choices"][0]["delta"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["a", "b"]
    assert all("index" not in c for c in calls)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_a_request_without_stream_is_answered_whole_as_before() -> None:
    with StubServer(["Hi"]).run_in_thread() as stub:
        status, kind, text = _post(stub.base_url, {"messages": []})
    assert (status, kind) == (200, "application/json")
    assert json.loads(text)["choices"][0]["message"]["content"] == "Hi"

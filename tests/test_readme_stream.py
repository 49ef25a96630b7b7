"""The docs' streaming / hybrid / tool_choice example runs against the stub server."""

from __future__ import annotations

import pytest

from docs_pages import block_with
from miniagent.testing.stub_server import StreamStyle, StubServer


def test_streaming_hybrid_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = block_with('tool_mode="hybrid", stream=True')
    script = [{"content": "Thought: I need the weather.", "tool_calls": [
                  {"name": "weather", "arguments": {"city": "Paris"}}]},
              "Paris: 18°C, sunny"]
    with StubServer(script, stream_style=StreamStyle(text_piece=2)).run_in_thread() as stub:
        exec(code.replace("http://127.0.0.1:8000/v1", stub.base_url), {})
        received = list(stub.requests)
    out = capsys.readouterr().out
    assert out.startswith("Thought: I need the weather.Paris: 18°C, sunny\n")
    assert out.endswith("completed Paris: 18°C, sunny\n")
    assert [r["tool_choice"] for r in received] == ["required", "auto"]
    assert all(r["stream"] is True for r in received)

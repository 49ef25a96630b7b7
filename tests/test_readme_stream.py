"""The README's streaming / hybrid / tool_choice example runs against the stub server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from miniagent.testing.stub_server import StreamStyle, StubServer

README = Path(__file__).parent.parent / "README.md"


def test_streaming_hybrid_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    code = next(b for b in blocks if "stream=True" in b)
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

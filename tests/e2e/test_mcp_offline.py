"""The docs' offline run: mcp-server-time's tools offered to the embedded model.

Skipped without llama.cpp or the packaged SmolLM2 file. The tiny model is not asked to be
right (it often answers without a tool); what is checked is that the server's tools reach the
model (prompt and grammar), that the run ends with an explicit status, and that the server is
stopped afterwards.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp_support import TIME_ARGS, descendants, wait_gone

from miniagent import Agent, Limits, ModelSettings
from miniagent.core.errors import ConfigError
from miniagent.core.runtime.events import Event, ModelStarted
from miniagent.core.types import ModelRequest
from miniagent.mcp import MCPServer


def test_embedded_model_gets_the_time_servers_tools() -> None:
    pytest.importorskip("xllamacpp")
    from miniagent.core.models.local import LocalModel, resolve_model_path

    try:
        path = resolve_model_path()
    except ConfigError as exc:
        pytest.skip(str(exc))
    before = descendants()
    requests: list[ModelRequest] = []

    def record(event: Event) -> None:
        if isinstance(event, ModelStarted):
            requests.append(event.request)

    server = MCPServer.stdio(sys.executable, args=TIME_ARGS, errlog=subprocess.DEVNULL)
    agent = Agent(model=LocalModel(path, tool_mode="react"), tools=[server],
                  limits=Limits(max_steps=2), model_settings=ModelSettings(max_tokens=64))
    agent.subscribe(record)
    result = agent.run("What time is it in Tokyo?")
    assert result.status in {"completed", "max_steps", "loop_detected"}
    prompt = "\n".join(str(m.get("content")) for m in requests[0].messages)
    assert "get_current_time" in prompt and "IANA timezone" in prompt
    assert requests[0].grammar is not None and "get_current_time" in requests[0].grammar
    assert not wait_gone(descendants() - before)

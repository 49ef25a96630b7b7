"""ScriptedModel: replays given outputs and records every request it receives.

Tests and demos use it instead of a real server::

    model = ScriptedModel([
        'Thought: add them\\nAction: add\\nAction Input: {"a": 2, "b": 3}',
        "Thought: done\\nFinal Answer: 5",
    ])
    result = Agent(model=model, tools=[add]).run("What is 2+3?")
    model.requests[1].messages[-1]["content"]   # 'Observation: 5'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from miniagent.errors import ModelError, ToolsNotSupported
from miniagent.types import ModelRequest, ModelResponse, ToolMode

ScriptItem = str | dict[str, Any] | ModelResponse | BaseException


class ScriptedModel:
    """A model that answers with the next item of a script.

    Each item is one of:

    - a ``str``: a text completion (what a ReAct model writes);
    - a ``dict``: either a whole ``/v1/chat/completions`` body (it has ``choices``) or
      an assistant message (``{"content": ..., "tool_calls": [...]}``), normalised the
      way responses from a real server are;
    - a :class:`~miniagent.types.ModelResponse`, used as it is;
    - an exception instance, raised (to inject a transport fault).

    When the script runs out, ``generate`` raises :class:`~miniagent.errors.ModelError`.
    """

    def __init__(self, outputs: Iterable[ScriptItem], *, tool_mode: ToolMode = "react") -> None:
        self.outputs: list[ScriptItem] = list(outputs)
        self.tool_mode: ToolMode = tool_mode
        self.requests: list[ModelRequest] = []
        self._native: bool | None = {"react": False, "native": True}.get(tool_mode)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.outputs):
            raise ModelError(f"ScriptedModel has no output left for request {index + 1}")
        item = self.outputs[index]
        if isinstance(item, ToolsNotSupported):
            self._native = False  # remembered, as a real server's rejection is
        return _to_response(item)

    def supports_native_tools(self) -> bool | None:
        return self._native

    async def aclose(self) -> None:
        return None


def _to_response(item: ScriptItem) -> ModelResponse:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(content=item, finish_reason="stop")
    from miniagent.protocol.native import normalize_completion

    body = item if "choices" in item else {"choices": [{"index": 0, "message": item}]}
    return normalize_completion(body)

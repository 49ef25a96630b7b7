"""ScriptedModel: replays given outputs and records every request it receives.

Tests and demos use it instead of a real server::

    model = ScriptedModel([
        'Thought: add them\\nAction: add\\nAction Input: {"a": 2, "b": 3}',
        lambda request: "Final Answer: " + request.messages[-1]["content"].split()[-1],
    ])
    result = Agent(model=model, tools=[add]).run("What is 2+3?")
    model.requests[1].messages[-1]["content"]   # 'Observation: 5'
    model.assert_all_used()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from miniagent.core.errors import ModelError
from miniagent.core.models.base import Capabilities
from miniagent.core.types import ModelRequest, ModelResponse, ToolMode

Reply = str | dict[str, Any] | ModelResponse | BaseException
ScriptItem = Reply | Callable[[ModelRequest], Reply]


class ScriptedModel:
    """A model that answers with the next item of a script.

    Each item is one of:

    - a ``str``: a text completion (what a ReAct model writes);
    - a ``dict``: either a whole ``/v1/chat/completions`` body (it has ``choices``) or
      an assistant message (``{"content": ..., "tool_calls": [...]}``), normalised the
      way responses from a real server are;
    - a :class:`~miniagent.core.types.ModelResponse`, used as it is;
    - an exception instance, raised (to inject a transport fault);
    - a function of the :class:`~miniagent.core.types.ModelRequest` returning any of the above,
      to answer from what was asked (the last observation, the tools offered, ...).

    ``grammar=True`` makes it a model that takes a grammar (as llama.cpp's server does): an
    agent then builds one and the requests it records carry it.

    When the script runs out, ``generate`` raises :class:`~miniagent.core.errors.ModelError`;
    :meth:`assert_all_used` checks that no scripted reply was left over.
    """

    def __init__(self, outputs: Iterable[ScriptItem], *, tool_mode: ToolMode = "react",
                 grammar: bool = False) -> None:
        self.outputs: list[ScriptItem] = list(outputs)
        self.tool_mode: ToolMode = tool_mode
        self.grammar = grammar
        self.requests: list[ModelRequest] = []

    @property
    def capabilities(self) -> Capabilities:
        native = {"react": False, "native": True, "hybrid": True}.get(self.tool_mode)
        return Capabilities(tool_mode=self.tool_mode, native_tools=native, grammar=self.grammar)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.outputs):
            raise ModelError(f"ScriptedModel has no output left for request {index + 1}")
        item = self.outputs[index]
        if callable(item) and not isinstance(item, BaseException):
            item = item(request)
        return _to_response(item)

    @property
    def unused(self) -> int:
        """How many scripted replies no request has consumed yet."""
        return max(0, len(self.outputs) - len(self.requests))

    def assert_all_used(self) -> None:
        """Raise AssertionError when scripted replies were left over (the run ended early)."""
        if self.unused:
            raise AssertionError(
                f"{self.unused} of {len(self.outputs)} scripted replies were never requested")

    async def aclose(self) -> None:
        return None


def _to_response(item: Reply) -> ModelResponse:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(content=item, finish_reason="stop")
    from miniagent.core.models.openai_wire import normalize_completion

    body = item if "choices" in item else {"choices": [{"index": 0, "message": item}]}
    return normalize_completion(body)

"""Scripted models that behave like real weak models, one script per task question.

``ByQuestion({"What is ...": [reply, reply, ...]})`` answers each run from the script of its
question (found in the request's user messages), so tasks can run in any order or at once.
Replies are what a model writes: ReAct text, or assistant messages with native tool calls.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from miniagent.core.errors import ModelError
from miniagent.core.models.base import Capabilities
from miniagent.core.models.scripted import _to_response
from miniagent.core.types import ModelRequest, ModelResponse, TokenUsage, ToolMode

USAGE = {"prompt": 100, "completion": 10, "cached": 50}
"""What every reply reports, so token metrics can be computed by hand."""


class ByQuestion:
    """A model answering each run from the script of its question."""

    def __init__(self, scripts: dict[str, list[Any]], *, tool_mode: ToolMode = "react") -> None:
        self.scripts = scripts
        self.tool_mode: ToolMode = tool_mode
        self.served: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(tool_mode=self.tool_mode, native_tools=self.tool_mode == "native",
                            grammar=False)

    def question_of(self, request: ModelRequest) -> str:
        for message in request.messages:
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, str):
                for question in self.scripts:
                    if question in content:
                        return question
        raise ModelError("no script for this request")

    async def generate(self, request: ModelRequest) -> ModelResponse:
        question = self.question_of(request)
        with self._lock:
            n = self.served[question]
            self.served[question] += 1
        script = self.scripts[question]
        if n >= len(script):
            raise ModelError(f"the script of {question!r} has no reply {n + 1}")
        response = _to_response(script[n])
        response.usage = TokenUsage(prompt_tokens=USAGE["prompt"],
                                    completion_tokens=USAGE["completion"],
                                    cached_tokens=USAGE["cached"])
        return response

    async def aclose(self) -> None:
        return None


def react(thought: str, tool: str, arguments: str) -> str:
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {arguments}"


def native(name: str, arguments: str, content: str | None = None) -> dict[str, Any]:
    call = {"id": "", "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "content": content, "tool_calls": [call]}

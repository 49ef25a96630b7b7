"""miniagent: a small, transparent ReAct / tool-calling agent runtime.

Write typed Python functions, point an :class:`Agent` at any OpenAI-compatible
``/v1/chat/completions`` server, and run::

    from miniagent import Agent, OpenAICompatibleModel, tool

    @tool
    def add(a: int, b: int) -> int:
        '''Add two integers.'''
        return a + b

    model = OpenAICompatibleModel(base_url="http://127.0.0.1:8000/v1", model="m")
    result = Agent(model=model, tools=[add]).run("What is 2+3?")
    print(result.status, result.final_answer)
"""

from typing import TYPE_CHECKING, Any

from miniagent._internal.version import __version__
from miniagent.core.agent import Agent
from miniagent.core.errors import (
    ConfigError,
    DecisionError,
    MiniAgentError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelSwitched,
    ModelTimeout,
    PayloadTooLarge,
    Rollover,
    RunFailure,
    RunInterrupted,
    SessionBusy,
    SessionError,
    SessionNotFound,
    SessionVersionError,
    StoreCorrupted,
    ToolDefinitionError,
    ToolError,
    ToolInterrupted,
    ToolSignal,
    ToolsNotSupported,
    UserError,
)
from miniagent.core.models.base import Capabilities, Model
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.models.scripted import ScriptedModel
from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.registry import register_protocol
from miniagent.core.retry import RetryPolicy
from miniagent.core.runtime.guards import Limits
from miniagent.core.runtime.run import AgentSpec, Compression
from miniagent.core.session import AgentSession
from miniagent.core.settings import Aids, MemorySettings, ModelSettings
from miniagent.core.store import CheckpointStore, InMemoryStore
from miniagent.core.throttles import EndpointLimits
from miniagent.core.tools.tool import Tool, tool
from miniagent.core.tools.toolbox import ToolRegistry, ToolSource
from miniagent.core.types import (
    CallRecord,
    Decision,
    Message,
    ModelRequest,
    ModelResponse,
    Observation,
    ParsedOutput,
    PendingApproval,
    RunResult,
    Step,
    TokenUsage,
    ToolCall,
    ToolContext,
    tool_context,
)

if TYPE_CHECKING:
    from miniagent.core.models.fallback import FallbackModel
    from miniagent.core.runtime.events import Event
    from miniagent.core.store.sqlite import SQLiteStore
    from miniagent.core.tools.warmup import WarmupReport
    from miniagent.core.tools.wrappers import Filtered, Prefixed, ToolRule, WithRules
    from miniagent.memory.items import MemoryItem
    from miniagent.memory.sqlite import Memory


_LAZY = {
    "SQLiteStore": "miniagent.core.store.sqlite", "Memory": "miniagent.memory.sqlite",
    "MemoryItem": "miniagent.memory.items", "WarmupReport": "miniagent.core.tools.warmup",
    "Filtered": "miniagent.core.tools.wrappers", "Prefixed": "miniagent.core.tools.wrappers",
    "ToolRule": "miniagent.core.tools.wrappers", "WithRules": "miniagent.core.tools.wrappers",
    "Event": "miniagent.core.runtime.events", "FallbackModel": "miniagent.core.models.fallback",
}
"""Names whose module loads on first use, not with ``import miniagent``: sqlite3, memory,
warm-up, the tool-source wrappers, the events (built only for a subscriber) and fallback models
are not on every agent's path (``tests/test_public_api.py`` pins what the import loads)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value

__all__ = [
    "ActionProtocol",
    "Agent",
    "AgentSession",
    "AgentSpec",
    "Aids",
    "CallRecord",
    "Capabilities",
    "CheckpointStore",
    "Compression",
    "ConfigError",
    "Decision",
    "DecisionError",
    "EndpointLimits",
    "Event",
    "FallbackModel",
    "Filtered",
    "InMemoryStore",
    "Limits",
    "Memory",
    "MemoryItem",
    "MemorySettings",
    "Message",
    "MiniAgentError",
    "Model",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelRequest",
    "ModelResponse",
    "ModelResponseError",
    "ModelSettings",
    "ModelSwitched",
    "ModelTimeout",
    "Observation",
    "OpenAICompatibleModel",
    "ParsedOutput",
    "PayloadTooLarge",
    "PendingApproval",
    "Prefixed",
    "RetryPolicy",
    "Rollover",
    "RunFailure",
    "RunInterrupted",
    "RunResult",
    "SQLiteStore",
    "ScriptedModel",
    "SessionBusy",
    "SessionError",
    "SessionNotFound",
    "SessionVersionError",
    "Step",
    "StoreCorrupted",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolInterrupted",
    "ToolRegistry",
    "ToolRule",
    "ToolSignal",
    "ToolSource",
    "ToolsNotSupported",
    "UserError",
    "WarmupReport",
    "WithRules",
    "__version__",
    "register_protocol",
    "tool",
    "tool_context",
]

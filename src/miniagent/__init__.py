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

from miniagent._internal.version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers read it so)
if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
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
    from miniagent.core.models.fallback import FallbackModel
    from miniagent.core.models.openai_compat import OpenAICompatibleModel
    from miniagent.core.models.scripted import ScriptedModel
    from miniagent.core.protocol.base import ActionProtocol
    from miniagent.core.protocol.registry import register_protocol
    from miniagent.core.retry import RetryPolicy
    from miniagent.core.runtime.events import Event
    from miniagent.core.runtime.guards import Limits
    from miniagent.core.runtime.run import AgentSpec, Compression
    from miniagent.core.session import AgentSession
    from miniagent.core.settings import Aids, MemorySettings, ModelSettings
    from miniagent.core.store import CheckpointStore, InMemoryStore
    from miniagent.core.store.sqlite import SQLiteStore
    from miniagent.core.throttles import EndpointLimits
    from miniagent.core.tools.tool import Tool, tool
    from miniagent.core.tools.toolbox import ToolRegistry, ToolSource
    from miniagent.core.tools.warmup import WarmupReport
    from miniagent.core.tools.wrappers import Filtered, Prefixed, ToolRule, WithRules
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
    from miniagent.memory.items import MemoryItem
    from miniagent.memory.sqlite import Memory


_HOMES = {
    "miniagent.core.agent": ("Agent",),
    "miniagent.core.errors": (
        "ConfigError", "DecisionError", "MiniAgentError", "ModelConnectionError", "ModelError",
        "ModelHTTPError", "ModelResponseError", "ModelSwitched", "ModelTimeout",
        "PayloadTooLarge", "Rollover", "RunFailure", "RunInterrupted", "SessionBusy",
        "SessionError", "SessionNotFound", "SessionVersionError", "StoreCorrupted",
        "ToolDefinitionError", "ToolError", "ToolInterrupted", "ToolSignal",
        "ToolsNotSupported", "UserError"),
    "miniagent.core.models.base": ("Capabilities", "Model"),
    "miniagent.core.models.fallback": ("FallbackModel",),
    "miniagent.core.models.openai_compat": ("OpenAICompatibleModel",),
    "miniagent.core.models.scripted": ("ScriptedModel",),
    "miniagent.core.protocol.base": ("ActionProtocol",),
    "miniagent.core.protocol.registry": ("register_protocol",),
    "miniagent.core.retry": ("RetryPolicy",),
    "miniagent.core.runtime.events": ("Event",),
    "miniagent.core.runtime.guards": ("Limits",),
    "miniagent.core.runtime.run": ("AgentSpec", "Compression"),
    "miniagent.core.session": ("AgentSession",),
    "miniagent.core.settings": ("Aids", "MemorySettings", "ModelSettings"),
    "miniagent.core.store": ("CheckpointStore", "InMemoryStore"),
    "miniagent.core.store.sqlite": ("SQLiteStore",),
    "miniagent.core.throttles": ("EndpointLimits",),
    "miniagent.core.tools.tool": ("Tool", "tool"),
    "miniagent.core.tools.toolbox": ("ToolRegistry", "ToolSource"),
    "miniagent.core.tools.warmup": ("WarmupReport",),
    "miniagent.core.tools.wrappers": ("Filtered", "Prefixed", "ToolRule", "WithRules"),
    "miniagent.core.types": (
        "CallRecord", "Decision", "Message", "ModelRequest", "ModelResponse", "Observation",
        "ParsedOutput", "PendingApproval", "RunResult", "Step", "TokenUsage", "ToolCall",
        "ToolContext", "tool_context"),
    "miniagent.memory.items": ("MemoryItem",),
    "miniagent.memory.sqlite": ("Memory",),
}
"""The module each public name lives in. ``import miniagent`` loads none of them: a name's
module loads when the name is first used (``from miniagent import Agent`` loads the agent and
what it needs, not the run machinery, HTTP or SQLite; ``tests/test_public_api.py`` pins what
each import loads), so a program, the ``miniagent`` command and its subcommands pay only for
what they use."""

_LAZY = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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

"""The public API is exactly what __all__ says; an accidental export or removal shows here."""

from __future__ import annotations

import subprocess
import sys

import miniagent

EXPECTED = {
    "Agent", "AgentSession", "ConfigError", "Event", "Limits", "Message", "MiniAgentError",
    "Model", "ModelConnectionError", "ModelError", "ModelHTTPError", "ModelRequest",
    "ModelResponse", "ModelResponseError", "ModelTimeout", "Observation",
    "OpenAICompatibleModel", "ParsedOutput", "RunFailure", "RunResult", "ScriptedModel", "Step",
    "TokenUsage", "Tool", "ToolCall", "ToolContext", "ToolDefinitionError", "ToolError",
    "ToolRegistry", "ToolSignal", "ToolsNotSupported", "UserError", "__version__", "tool",
    "tool_context",
    "CallRecord", "CheckpointStore", "MemoryStore", "SQLiteStore", "PendingApproval",
    "SessionBusy", "SessionError", "SessionNotFound", "SessionVersionError", "StoreCorrupted",
    "ActionProtocol", "Capabilities", "Decision", "DecisionError", "ToolSource",
    # one agent spec, protocols by name, rules that stack on any tool source, and the effects'
    # exceptions that interrupt a run
    "AgentSpec", "register_protocol", "Filtered", "Prefixed", "ToolRule", "WithRules",
    "PayloadTooLarge", "RunInterrupted", "ToolInterrupted", "Rollover",
    # long-term memory (its SQLite file, like SQLiteStore, loads sqlite3 on first use)
    "Memory", "MemoryItem",
    # a tool's retry policy, and limits shared by the sessions of a process (issue 19)
    "RetryPolicy", "EndpointLimits",
    # what Agent.start() warmed (issue 19)
    "WarmupReport",
}


def test_all_is_pinned() -> None:
    assert set(miniagent.__all__) == EXPECTED
    for name in miniagent.__all__:
        assert hasattr(miniagent, name), name


def test_import_stays_light() -> None:
    code = (
        "import sys, miniagent; "
        "heavy = {'openai', 'httpx', 'aiohttp', 'typer', 'rich', 'llama_cpp', 'xllamacpp', "
        "'temporalio'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_leaves_optional_parts_unloaded() -> None:
    """Tracing, grammars, MCP, Temporal, reports, memory and SQLite load on first use."""
    code = (
        "import sys, miniagent; "
        "lazy = ('miniagent.observe', 'miniagent.protocol.grammar', "
        "'miniagent.protocol.json_grammar', 'miniagent.mcp', 'miniagent.temporal', "
        "'miniagent.report', 'miniagent.memory.store', 'miniagent.store.sqlite', 'sqlite3', "
        "'pathlib', 'pydantic'); "
        "print(sorted(m for m in sys.modules if m.startswith(lazy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

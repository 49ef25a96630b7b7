"""The public API is exactly what __all__ says; an accidental export or removal shows here."""

from __future__ import annotations

import json
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
    "CallRecord", "CheckpointStore", "InMemoryStore", "SQLiteStore", "PendingApproval",
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
    # the Agent's settings as values (issue 34)
    "Aids", "Compression", "MemorySettings", "ModelSettings",
    # fallback models, and the signal that the next one takes requests of another shape
    # (issue 35)
    "FallbackModel", "ModelSwitched",
}


def test_all_is_pinned() -> None:
    assert set(miniagent.__all__) == EXPECTED
    for name in miniagent.__all__:
        assert hasattr(miniagent, name), name


def test_import_stays_light() -> None:
    heavy = ("openai", "httpx", "aiohttp", "typer", "rich", "llama_cpp", "xllamacpp",
             "temporalio")
    assert _loaded_by("import miniagent", heavy) == []


LAZY_MODULES = (
    # tracing, grammars, MCP, Temporal, reports, memory, SQLite, pydantic
    "miniagent.observe", "miniagent.core.protocol.grammar",
    "miniagent.mcp", "miniagent.temporal", "miniagent.report", "miniagent.memory",
    "miniagent.core.store.sqlite", "sqlite3", "pathlib", "pydantic",
    # warm-up, tool-source wrappers, agents as tools, tools from a JSON schema: each loads
    # when it is used
    "miniagent.core.tools.warmup", "miniagent.core.tools.wrappers",
    "miniagent.core.tools.agent_tool",
    "miniagent.core.tools.schema_tool",
    # events: built only for a subscriber (on_event, a trace, the CLI), loaded with the first
    "miniagent.core.runtime.events",
    # context compression and a memory's recall: loaded by the agents that configure them
    "miniagent.core.runtime.compress", "miniagent.core.runtime.recall",
    # tool selection and quoted answers (a small-model aid): loaded by the agents using them
    "miniagent.core.runtime.selection", "miniagent.core.protocol.quotes",
    # the hybrid protocol: built only for tool_mode="hybrid"; fallback models
    "miniagent.core.models.fallback",
    "miniagent.core.protocol.hybrid",
    # a session listing's types (the CLI's, the UI's)
    "miniagent.core.store.listing",
    # streaming (server-sent events): loaded with a streaming model's first call
    "miniagent.core.models.streaming", "miniagent.core.models.sse",
    # stdlib modules of rare paths: "did you mean" (difflib), hashed names (hashlib), URL
    # checks at model construction (urllib.parse, ipaddress), name patterns (fnmatch)
    "difflib", "hashlib", "urllib", "ipaddress", "fnmatch",
)


def _loaded_by_import(names: tuple[str, ...]) -> list[str]:
    """The modules among ``names`` (or under them) that ``import miniagent`` loads."""
    code = (
        f"import json, sys; before = set(sys.modules); import miniagent; lazy = {names!r}; "
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m in lazy "
        "or m.startswith(tuple(n + '.' for n in lazy)))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_import_leaves_optional_parts_unloaded() -> None:
    """What only some agents use loads on first use, not with ``import miniagent``."""
    assert _loaded_by_import(LAZY_MODULES) == []


def test_lazy_names_load_on_first_use() -> None:
    """Every public name a module ``__getattr__`` serves is the real class, and loads its module."""
    code = (
        "import sys, miniagent; "
        "from miniagent import Event, Filtered, Memory, MemoryItem, Prefixed, SQLiteStore, "
        "ToolRule, WarmupReport, WithRules; "
        "print(all(isinstance(c, type) for c in (Event, Filtered, Memory, MemoryItem, Prefixed, "
        "SQLiteStore, ToolRule, WarmupReport, WithRules)), "
        "'miniagent.core.tools.wrappers' in sys.modules, miniagent.WarmupReport is WarmupReport)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"]


def test_import_loads_no_module_of_the_core() -> None:
    """``import miniagent`` loads only the version: each public name's module loads on its
    first use, so the command's subcommands and a program pay only for what they use."""
    code = ("import sys; before = set(sys.modules); import miniagent; "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('miniagent.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['miniagent._internal', 'miniagent._internal.version']"


def test_every_public_name_is_served_from_its_module() -> None:
    """Every name of ``__all__`` comes from the module ``__getattr__`` names for it (or is
    defined in the package itself), as ``from miniagent import X`` gives it."""
    code = (
        "import importlib, miniagent; "
        "bad = [n for n in miniagent.__all__ if n != '__version__' and getattr(miniagent, n) is "
        "not getattr(importlib.import_module(miniagent._LAZY[n]), n)]; "
        "print(bad, sorted(set(miniagent.__all__) - set(dir(miniagent))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


RUN_MACHINERY = (
    # the step logic and its driver, loaded by an agent's first run
    "miniagent.core.runtime.loop", "miniagent.core.runtime.inprocess",
    # the HTTP transport, loaded by the first OpenAICompatibleModel
    "miniagent.core.models.http", "miniagent.core.models.openai_compat",
    # the event loop (with ssl, sockets, subprocesses)
    "asyncio",
)


def _loaded_by(code: str, names: tuple[str, ...]) -> list[str]:
    """The modules among ``names`` that running ``code`` in a fresh interpreter loads."""
    probe = (f"import json, sys; {code}; "
             f"print(json.dumps(sorted(set(sys.modules) & set({names!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return list(json.loads(out.stdout))


def test_agent_and_tool_import_without_the_run_machinery() -> None:
    """``from miniagent import Agent, tool`` loads neither the run machinery, the HTTP
    transport nor asyncio: they load with a first run, a first HTTP model."""
    assert _loaded_by("from miniagent import Agent, tool", RUN_MACHINERY) == []


def test_an_agent_is_made_without_the_run_machinery() -> None:
    """Making an agent builds its spec and protocol; its first run loads what runs it."""
    made = ("from miniagent import Agent, ScriptedModel, tool; "
            "add = tool(lambda a, b: a + b, name='add', description='Add.'); "
            "Agent(model=ScriptedModel(['Final Answer: 5']), tools=[add])")
    assert _loaded_by(made, RUN_MACHINERY[:-1]) == []
    ran = made.replace("tools=[add])", "tools=[add]).run('2+3?')")
    assert _loaded_by(ran, RUN_MACHINERY) == [
        "asyncio", "miniagent.core.runtime.inprocess", "miniagent.core.runtime.loop"]

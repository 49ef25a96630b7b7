"""How the auto protocol tells, from ``prompt_tokens``, that a server never showed the tools:
measured and derived prompt sizes of servers that show them are never judged so."""

from __future__ import annotations

from typing import Any

import pytest

from miniagent import tool
from miniagent.core.protocol.auto import AutoProtocol, unshown_tools
from miniagent.core.types import Message, ModelResponse, TokenUsage


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


def _mcp_style(name: str, properties: list[str]) -> Any:
    """A tool as MCP servers describe theirs: $schema, titles, required, no descriptions."""
    props = {p: {"title": p.replace("_", " ").title(), "type": "string"} for p in properties}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "title": f"{name}Arguments", "properties": props, "required": properties,
              "additionalProperties": False}
    return type("Spec", (), {"name": name, "description": "", "parameters": schema})()


def _judge(tools: list[Any], prompt_tokens: int | None, question: str = "What is 17 * 23?",
           cached: int = 0) -> str | None:
    request = AutoProtocol().render([Message(role="user", content=question)], tools)
    usage = (TokenUsage.unknown(estimated=99) if prompt_tokens is None else
             TokenUsage(prompt_tokens=prompt_tokens, completion_tokens=9, cached_tokens=cached))
    return unshown_tools(ModelResponse(content="391", usage=usage), request)


def test_the_prompt_of_a_server_that_ignores_the_tools_is_too_small_for_them() -> None:
    # llama-cpp-python's server, default chat format, SmolLM2: 40 prompt tokens with or
    # without the tools (measured)
    said = _judge([multiply], 40)
    assert said is not None and said.startswith("prompt_tokens 40, the tools alone need about")


@pytest.mark.parametrize(("tools", "prompt_tokens", "server"), [
    ([multiply], 62, "OpenAI (the cookbook's count for gpt-4o: 47 for the tool, 15 for the rest)"),
    ([multiply], 238, "chatml-function-calling with a system message (measured)"),
    ([multiply], 88 + 20, "a template that dumps the tools' JSON (SmolLM2's tokenizer: 88)"),
])
def test_servers_that_show_the_tools_are_never_judged_otherwise(
        tools: list[Any], prompt_tokens: int, server: str) -> None:
    assert _judge(tools, prompt_tokens) is None, server


def test_keys_a_compact_rendering_leaves_out_are_not_counted() -> None:
    # OpenAI shows each of these 12 tools in about 7 + 12 + 3 + 8 per property tokens
    # (func_init, func_end, prop_init, prop_key and "name:type:"), names once, no titles
    names = ["source_timezone", "target_timezone", "reference_time", "output_format"]
    tools = [_mcp_style(f"convert_time_{n}", names) for n in range(12)]
    shown = 12 * (7 + 12 + 3 + 6 + 8 * len(names)) + 15
    assert _judge(tools, shown) is None


def test_unreported_usage_and_cached_tokens_are_never_read_as_a_small_prompt() -> None:
    assert _judge([multiply], None) is None  # not reported (only estimated)
    assert _judge([multiply], 0) is None
    assert _judge([multiply], 5, cached=2000) is None  # cached tokens reported apart

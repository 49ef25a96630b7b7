"""What the model reads is plain text: no reST or Markdown markup in the built-in tools'
descriptions, their parameters' descriptions, or the prompts each protocol sends with them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from miniagent.core.protocol.registry import ProtocolRef, build_protocol
from miniagent.core.tools.agent_tool import PARAMETERS as AGENT_TOOL_PARAMETERS
from miniagent.core.tools.builtin import builtin_tools
from miniagent.core.tools.tool import Tool
from miniagent.core.types import Message
from miniagent.evals.builtin import tools as eval_tools

MARKUP = re.compile(
    r"``"                              # reST inline literal
    r"|:[a-z]+:`"                      # reST role: :class:`X`, :func:`f`, :data:`N`
    r"|`[^`\s][^`\n]*`"                # Markdown inline code
    r"|\*\*[^\s*][^*\n]*\*\*"          # Markdown bold
    r"|\[[^\]\n]+\]\([^)\n]+\)"        # Markdown link
    r"|^\s*(?:#{1,6} |\.\. [a-z-]+::)",  # Markdown heading, reST directive
    re.MULTILINE,
)

_FOUND = [*builtin_tools("."), *(v for v in vars(eval_tools).values() if isinstance(v, Tool))]
ALL_TOOLS = list({t.name: t for t in _FOUND}.values())  # the eval tools include the calculator


def descriptions(schema: Any) -> Iterator[str]:
    """Every ``description`` string anywhere in a JSON Schema."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                yield value
            else:
                yield from descriptions(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from descriptions(item)


def test_the_pattern_finds_what_it_should() -> None:
    for marked in ("such as ``2 + 3``", "see :class:`Tool`", "`x`", "**bold**", "[a](b)",
                   "# Title", ".. note::"):
        assert MARKUP.search(marked), marked
    assert not MARKUP.search("Supports + - * / // % **, parentheses and 'quotes'.")


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_builtin_tool_descriptions_are_plain_text(tool: Tool) -> None:
    texts = [tool.description or "", *descriptions(tool.parameters)]
    assert [t for t in texts if MARKUP.search(t)] == []


def test_agent_tool_parameters_are_plain_text() -> None:
    assert [t for t in descriptions(AGENT_TOOL_PARAMETERS) if MARKUP.search(t)] == []


@pytest.mark.parametrize("name", ["react", "native", "hybrid", "auto"])
def test_protocol_prompts_are_plain_text(name: str) -> None:
    protocol = build_protocol(ProtocolRef(name=name))
    request = protocol.render([Message(role="user", content="What is 2 + 3?")], ALL_TOOLS)
    texts = [m["content"] for m in request.messages if isinstance(m.get("content"), str)]
    texts += [*descriptions(request.tools or []),
              protocol.format_error("no Action found", ALL_TOOLS)]
    assert [m.group() for t in texts for m in MARKUP.finditer(t)] == []

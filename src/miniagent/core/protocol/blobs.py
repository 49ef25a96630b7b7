"""JSON blobs that name a tool, as other frameworks' prompts make models write them.

LangChain's structured chat asks for ``{"action": "<tool>", "action_input": {...}}`` (with
``"action": "Final Answer"`` for the answer), OpenAI-style text prompts and smolagents for
``{"name": "<tool>", "arguments": {...}}`` (Llama 3 writes ``"parameters"``; smolagents ends
with its ``final_answer`` tool), a few for ``{"tool": ..., "tool_input": ...}``. The ReAct
parser (:mod:`miniagent.core.protocol.react_parser`) finds the blob; this module decides what it
means: one call, a final answer, or an error. A blob is never guessed into a call: one cut off
or naming no tool is an error the model is shown.
"""

from __future__ import annotations

import json
import re
from typing import Any

from miniagent._internal.jsonscan import MAX_DEPTH, decode_arguments, loads_limited, scan_end
from miniagent.core.types import ToolCall

__all__ = ["is_final_name", "read_blob", "unwrap"]

_FINAL_NAMES = frozenset({"final answer", "finalanswer"})
# (name key, argument keys), tried in order
_BLOB_KEYS = (("action", ("action_input", "input", "arguments")),
              ("name", ("arguments", "parameters", "args")),
              ("tool", ("tool_input", "input", "arguments")))
# A pattern as text: ``re`` compiles it (and caches it) when an input first ends with ")".
_WRAPPER = r"(?s)([A-Za-z_][\w.\-]*)[ \t]*\((.*)\)"


def is_final_name(name: str) -> bool:
    """``Final Answer``, ``final_answer``, ``FinalAnswer``: the name of no tool but the end."""
    return name.lower().replace("_", " ") in _FINAL_NAMES


def read_blob(raw: str, no_tool: frozenset[str]) -> tuple[ToolCall | None, str | None, str]:
    """``(call, final answer, error)`` of a blob's raw text; exactly one is set (``error`` is
    "" otherwise). Names in ``no_tool`` (``none``, ``n/a``) name no tool. Of a list of blobs,
    the first counts, as only the first action does."""
    complete = scan_end(raw, 0) == len(raw)  # a truncated blob is not repaired into a call
    named = _named(_decode(raw)) if complete else None
    if named is None or named[0].lower() in no_tool:
        what = "names no tool" if complete else "is not complete"
        return None, None, (f"the JSON object after 'Action:' {what}: write "
                            '{"action": "<tool name>", "action_input": {...}}, or the Action and '
                            "Action Input lines")
    name, given = named
    if is_final_name(name):
        if isinstance(given, dict) and len(given) == 1:  # smolagents' final_answer(answer=...)
            given = next(iter(given.values()))
        answer = (given if isinstance(given, str) else _json_text(given)).strip()
        return None, answer or None, "" if answer else "'Final Answer' is empty"
    if isinstance(given, str):
        raw_args = given
        arguments, error = decode_arguments(given)
    else:
        raw_args = "" if given is None else _json_text(given)
        arguments, error = (given if isinstance(given, dict) else None), None
    call = ToolCall(id="", name=name, arguments=arguments if arguments is not None else {},
                    raw_arguments=raw_args, arguments_error=error)
    return call, None, ""


def unwrap(raw: str, name: str) -> tuple[str, str | None]:
    """``Action Input: calc({"x": 1})``: the JSON inside the call of the named tool, and None;
    a wrapper naming another tool gives an error instead (which was meant is unknown)."""
    m = re.fullmatch(_WRAPPER, raw.strip()) if raw.endswith(")") else None
    if m is None:
        return raw, None
    inner = m.group(2).strip()
    if inner and inner[0] not in "{\"'":
        return raw, None  # positional Python-style arguments: left to the tool's validation
    if m.group(1).lower() != name.lower():
        return raw, (f"'Action Input' calls {m.group(1)}(...) but the Action is '{name}': "
                     "write the arguments as one JSON object")
    return inner, None


def _decode(raw: str) -> Any:
    if raw.startswith("["):
        try:
            items = loads_limited(raw, max_depth=MAX_DEPTH)
        except ValueError:
            return None
        return items[0] if isinstance(items, list) and items else None
    return decode_arguments(raw)[0]


def _named(value: Any) -> tuple[str, Any] | None:
    """The tool name and the arguments of a blob, if it names a tool."""
    if not isinstance(value, dict):
        return None
    for name_key, argument_keys in _BLOB_KEYS:
        name = value.get(name_key)
        if isinstance(name, str) and name.strip():
            return name.strip(), next((value[k] for k in argument_keys if k in value), None)
    return None


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)

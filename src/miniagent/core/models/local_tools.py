"""Native tool calls for the embedded model, whose chat template knows no tools.

SmolLM2's template (like most small models') has no place for ``tools``: llama.cpp's server
then takes the field and leaves it out of the prompt (measured: ``prompt_tokens`` is the
same with and without it). So the embedded model's ``native`` mode says the tools in a
system message of its own and constrains the reply with a grammar built from the tools'
schemas (:class:`~miniagent.core.protocol.grammar.JsonSchemaGrammar`, strings bounded as in
the ReAct grammar, so an argument cannot run away): one object, ``{"tool": NAME,
"arguments": {...}}`` to call a tool, or ``{"answer": TEXT}`` to answer where
``tool_choice`` allows an answer. The reply is turned back into OpenAI's ``tool_calls``,
so the native protocol reads it as from any server.

History goes the other way: earlier assistant calls are shown as the JSON the model wrote,
and tool results as user turns naming the tool, since the template has no ``tool`` role.

A reply cut off by ``max_tokens`` is left for the loop's cut-off guard: its unclosed JSON is
returned as a call with the unclosed arguments (never repaired, never run).
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from miniagent.core.protocol.grammar import JsonSchemaGrammar, gbnf_literal, string_bound

__all__ = ["ANSWER_MAX_CHARS", "ask_for_a_call", "call_grammar", "read_tool_reply"]

ANSWER_MAX_CHARS = 1000
"""The longest ``answer`` the schema allows (a bound on a reply that runs away)."""

_INSTRUCTIONS = (
    "You can call tools. Reply with one JSON object and nothing else: "
    '{"tool": "<tool name>", "arguments": {<the tool\'s arguments>}} to call a tool'
)
_ANSWER = ', or {"answer": "<your final answer>"} when you can answer.'
_ANSWER_ONLY = '{"answer": "<your final answer>"}.'
_ANSWER_HEAD = '{"answer": '
_NAMED = re.compile(r'^\s*\{\s*"tool"\s*:\s*"(?P<name>[^"]*)"?(?P<rest>.*)$', re.DOTALL)
_ARGUMENTS = re.compile(r'"arguments"\s*:\s*(?P<args>.*)$', re.DOTALL)


def ask_for_a_call(body: dict[str, Any], tools: list[dict[str, Any]],
                   tool_choice: str | None, max_tokens: int | None) -> None:
    """Turn ``body`` (a chat completion request with ``tools``) into one the template can
    render: the tools said in a system message, the reply bound by a grammar whose free
    strings fit in ``max_tokens``."""
    chosen = _chosen(tools, tool_choice)
    answer = tool_choice in (None, "auto", "none") or not chosen
    history = _text_history(body["messages"])
    system = _system(chosen, answer) if tool_choice != "none" else {
        "role": "system", "content": "No tool may be called now. Reply with " + _ANSWER_ONLY}
    if history and history[0].get("role") == "system":  # the run's instructions come first
        system["content"] = f"{history.pop(0).get('content') or ''}\n\n{system['content']}"
    body["messages"] = [system, *history]
    body.pop("tools", None)
    body.pop("tool_choice", None)
    if chosen or tool_choice == "none":  # none: the history shows calls as JSON text, which
        body["grammar"] = call_grammar(chosen, answer, max_tokens)  # the reply must not copy


def read_tool_reply(reply: dict[str, Any]) -> None:
    """Rewrite ``reply``'s first message in place: a call becomes ``tool_calls``, an
    answer its ``content``; text that is neither stays as it is."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return
    message = choices[0].get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        return
    text = message["content"]
    try:
        value = json.loads(text)
    except ValueError:
        cut = _NAMED.match(text)  # cut off after its first key: the loop's guard refuses it
        if cut is not None:
            args = _ARGUMENTS.search(cut["rest"])
            _set_call(message, cut["name"], args["args"] if args else "{")
        return
    if isinstance(value, dict) and isinstance(value.get("tool"), str):
        _set_call(message, value["tool"], json.dumps(value.get("arguments", {}),
                                                     ensure_ascii=False))
    elif isinstance(value, dict) and isinstance(value.get("answer"), str):
        message["content"] = value["answer"]


def _set_call(message: dict[str, Any], name: str, arguments: str) -> None:
    message["content"] = None
    message["tool_calls"] = [{"id": f"call_{secrets.token_hex(6)}", "type": "function",
                              "function": {"name": name, "arguments": arguments}}]


def _chosen(tools: list[dict[str, Any]], tool_choice: str | None) -> list[dict[str, Any]]:
    functions = [t["function"] for t in tools if isinstance(t.get("function"), dict)]
    if tool_choice == "none":
        return []
    if tool_choice not in (None, "auto", "required"):
        return [f for f in functions if f.get("name") == tool_choice]
    return functions


def _system(functions: list[dict[str, Any]], answer: bool) -> dict[str, Any]:
    if not functions:
        return {"role": "system", "content": "Answer the user."}
    lines = [_INSTRUCTIONS + (_ANSWER if answer else ".")]
    for function in functions:
        params = json.dumps(function.get("parameters") or {}, ensure_ascii=False)
        lines.append(f"- {function.get('name')}: {function.get('description') or ''} "
                     f"Arguments: {params}")
    return {"role": "system", "content": "\n".join(lines)}


def call_grammar(functions: list[dict[str, Any]], answer: bool,
                 max_tokens: int | None) -> str:
    """GBNF for one reply: a call of one of ``functions``, or (``answer``) an answer."""
    builder = JsonSchemaGrammar(string_chars=string_bound(max_tokens))
    branches = []
    for function in functions:
        name = str(function.get("name"))
        schema = function.get("parameters") or {}
        if not isinstance(schema, dict) or "type" not in schema:
            schema = {"type": "object", **(schema if isinstance(schema, dict) else {})}
        args = builder.rule_for(schema, f"{name}-args")
        head = gbnf_literal('{"tool": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ')
        branches.append(f'{head} {args} "}}"')
    if answer:
        text = builder.rule_for({"type": "string", "maxLength": ANSWER_MAX_CHARS}, "answer")
        branches.append(f'{gbnf_literal(_ANSWER_HEAD)} {text} "}}"')
    # a line break may end it: a grammar that ends at the brace forbids the tokens that hold
    # the brace and a line break, and a model then writes on inside a string instead
    return f"root ::= ({' | '.join(branches)}) \"\\n\"?\n{builder.render_rules()}\n"


def _text_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    shown: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            shown.append({"role": "assistant", "content": _calls_text(message, names)})
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id")), "the tool")
            shown.append({"role": "user",
                          "content": f"Result of {name}: {message.get('content') or ''}"})
        elif role == "system" and shown:
            shown.append({"role": "user", "content": message.get("content") or ""})
        else:
            shown.append(message)
    return shown


def _calls_text(message: dict[str, Any], names: dict[str, str]) -> str:
    texts = []
    for call in message["tool_calls"]:
        function = call.get("function") or {}
        names[str(call.get("id"))] = str(function.get("name"))
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = function.get("arguments")
        texts.append(json.dumps({"tool": function.get("name"), "arguments": arguments},
                                ensure_ascii=False))
    return "\n".join(texts)

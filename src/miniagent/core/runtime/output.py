"""Typed results, the step logic's part: how a turn's answer is asked for and checked.

A turn with an output schema (``Agent(output_type=...)`` or ``run(..., output_type=...)``: the
type becomes a JSON Schema once, in :mod:`miniagent.core.output`) wants its final answer as a
JSON value that fits the schema. The step logic asks for it in the shape the request has, after
the protocol rendered it (:func:`constrain`), and checks what comes back (:func:`answer_of`):

- a ReAct request (text, stop words): the system prompt gives the schema; where the request
  has a grammar (a model that takes one: the embedded model, llama.cpp's server), its Final
  Answer branch becomes the schema's JSON grammar, so the answer parses and fits its structure;
- a native request (``tools``): the server's ``response_format`` (``json_schema``) where the
  model's capabilities say it takes one, else a tool :data:`FINAL_RESULT` whose arguments are
  the answer; calling it alone ends the run. Called beside other calls it is not taken (the
  answer could not use their results: :func:`early_answer`); the others run, and the model
  gives it again once it has read them. Nor is a call cut off by ``max_tokens``.

An answer that is not JSON, or does not fit, is told to the model with what is wrong and the
schema (:func:`repair_note`), at most :data:`OUTPUT_RETRIES` times a turn; then the run ends
``error`` with the reason. No I/O here: a Temporal workflow runs it too.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from miniagent.core.runtime.guards import enforce_choice
from miniagent.core.types import ModelRequest, ParsedOutput, Step, ToolCall

__all__ = ["FINAL_RESULT", "OUTPUT_ERROR", "OUTPUT_RETRIES", "answer_of", "constrain",
           "early_answer", "enforce_answer_choice", "final_call", "instructions", "repair_note",
           "repairs_done", "schema_problems"]

OUTPUT_RETRIES = 2
"""Repairs a turn gets for an answer that does not fit its schema. A model told exactly what is
wrong fixes it in one repair nearly always; the second is for a model that fixed one field and
broke another; more would spend steps on a model that cannot write the schema at all."""

FINAL_RESULT = "final_result"
"""The tool a native request without ``response_format`` offers for the answer."""

OUTPUT_ERROR = "the answer does not fit the output schema"
"""How a step whose answer was refused begins its ``error`` (what :func:`repairs_done` counts)."""

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)
_FINAL = r"(?m)^final ::= .*$"
_RULE = re.compile(r"(?m)^([a-z0-9-]+) ::= ")
_LISTED = 5
"""Errors a repair note lists (the rest counted): a model fixes a few at a time anyway."""
_MESSAGE_CHARS = 240
"""The longest error message in a note (its middle elided: a long value's repr, a long enum)."""
_SCHEMA_CHARS = 2000
"""The longest schema a repair note repeats; a longer one is in the instructions already."""


def answer_of(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """The JSON value of the answer ``text`` (a Markdown code fence around it is dropped), and
    what is wrong with it for ``schema`` (None: it fits)."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        value = json.loads(body)
    except ValueError as exc:
        return None, f"it is not JSON ({exc})"
    problems = schema_problems(schema, value)
    return value, problems or None


def schema_problems(schema: dict[str, Any], value: Any) -> str:
    """What is wrong with ``value`` for ``schema``, in words ("" when nothing is)."""
    import jsonschema  # loaded by the first typed answer: ``import miniagent`` does not load it
    from jsonschema.validators import validator_for

    try:
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
    except Exception as exc:  # a schema the facade checked cannot fail here; one read back may
        return f"the schema cannot be checked ({type(exc).__name__})"
    found = [f"{_clip('.'.join(['answer', *(str(p) for p in e.absolute_path)]), 80)}: "
             f"{_clip(e.message, _MESSAGE_CHARS)}" for e in errors]
    more = f"; and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
    return "; ".join(found[:_LISTED]) + more


def repairs_done(steps: list[Step]) -> int:
    """How many answers of the turn's ``steps`` were refused for not fitting the schema."""
    return sum(1 for s in steps if s.error and s.error.startswith(OUTPUT_ERROR))


def repair_note(problem: str, schema: dict[str, Any], *, by_tool: bool) -> str:
    """What the model is told of an answer that does not fit."""
    how = (f"Call {FINAL_RESULT} again with arguments that fit it" if by_tool
           else "Give your final answer again as one JSON value that fits it, nothing else")
    shown = _compact(schema)
    where = (f"The schema: {shown}" if len(shown) <= _SCHEMA_CHARS else
             f"The schema is the one in your instructions ({len(shown):,} characters).")
    return f"Your final answer does not fit the required schema: {problem}. {how}. {where}"


def instructions(given: str | None, schema: dict[str, Any]) -> str:
    """The agent's instructions, with what the answer must be."""
    note = ("Your final answer must be one JSON value (no prose, no code fence) that fits "
            f"this JSON Schema: {_compact(schema)}")
    return f"{given.strip()}\n\n{note}" if given and given.strip() else note


def final_call(calls: list[ToolCall]) -> ToolCall | None:
    """The reply's call of :data:`FINAL_RESULT`, if it made one."""
    return next((call for call in calls if call.name == FINAL_RESULT), None)


def enforce_answer_choice(parsed: ParsedOutput, choice: str | None) -> ParsedOutput:
    """:func:`~miniagent.core.protocol.base.enforce_choice` for a typed turn, whose
    :data:`FINAL_RESULT` calls are an answer, not a tool call: allowed on a step that may call
    no tool (the last one at ``max_steps``), refused where a tool must be called first."""
    if parsed.kind != "action" or any(c.name != FINAL_RESULT for c in parsed.tool_calls):
        return enforce_choice(parsed, choice)
    checked = enforce_choice(replace(parsed, kind="final"), choice)
    return parsed if checked.kind == "final" else checked


def early_answer(call: ToolCall, calls: list[ToolCall]) -> str | None:
    """Why ``call`` (of :data:`FINAL_RESULT`) is not taken as the answer: the reply made other
    ``calls`` beside it, whose results the answer could not use. None: it is taken."""
    if call.name != FINAL_RESULT or len(calls) < 2:
        return None
    return (f"{FINAL_RESULT} was not taken: it came with other calls, whose results your answer "
            f"could not use. Read their results, then call {FINAL_RESULT} alone.")


def constrain(request: ModelRequest, schema: dict[str, Any], *, response_format: bool
              ) -> ModelRequest:
    """``request`` asking for an answer that fits ``schema``, in its own shape (see the
    module docstring)."""
    if request.tools is None and request.stop:  # a ReAct request
        if request.grammar and re.search(_FINAL, request.grammar):
            request.grammar = _grammar(request.grammar, schema, request.max_tokens)
        return request
    if response_format:
        request.extra_body = {**request.extra_body, "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "final_answer", "schema": schema, "strict": False}}}
        return request
    spec = {"type": "function", "function": {
        "name": FINAL_RESULT, "description": "Give the final answer: its arguments are the "
                                             "answer. Call it alone, once you know the answer.",
        "parameters": schema}}
    request.tools = [*(request.tools or []), spec]
    return request


def _grammar(grammar: str, schema: dict[str, Any], max_tokens: int | None) -> str:
    """``grammar`` whose Final Answer is a JSON value of ``schema`` (and nothing after it)."""
    from miniagent.core.protocol.grammar import JsonSchemaGrammar, string_bound

    taken = set(_RULE.findall(grammar))
    builder = JsonSchemaGrammar(string_chars=string_bound(max_tokens), taken=taken)
    value = builder.rule_for(schema, "answer-value")
    final = f'final ::= "Final Answer: " {value}'
    lines = [line for line in builder.render_rules().splitlines()
             if line.split(" ::= ", 1)[0] not in taken]  # a primitive the turn has stays its
    body = re.sub(_FINAL, lambda _: final, grammar, count=1).rstrip("\n")
    return "\n".join([body, *lines]) + "\n"


def _clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, its middle elided (both ends say most)."""
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def _compact(schema: dict[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))

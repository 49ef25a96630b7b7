"""tool_choice: whether (and which) tool the model must call on a step, in every protocol.

The choice is ``auto`` (the model decides), ``required`` (some tool call, no final answer),
``none`` (no tool call: answer) or one tool's name (a call of that tool). It reaches the model
the way its protocol allows:

- with native tools (``native``, ``hybrid``, ``auto`` while native): the request's
  ``tool_choice`` field, which the transport sends as OpenAI's ``"auto"``, ``"required"``,
  ``"none"`` or ``{"type": "function", "function": {"name": ...}}``
  (:func:`~miniagent.core.models.openai_wire.wire_tool_choice`);
- with ReAct: the grammar, when the request carries one: ``required`` drops the Final Answer
  branch, a name leaves only that tool's Action, ``none`` only the Final Answer.

Servers and models may still disobey (no grammar, a server that ignores the field), so the
parsed reply is checked too: a reply the choice forbids becomes an invalid one, and the model is
told what the step needs. The history is not touched: the prompt stays a prefix of the next.

``required`` and a name hold until the run's first tool call, then the choice returns to
``auto``, so the run can still end with an answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from miniagent.core.types import ModelRequest, ParsedOutput, Step, ToolLike

__all__ = ["KEYWORDS", "check_choice", "constrain", "enforce", "for_step"]

KEYWORDS = ("auto", "required", "none")
"""The choices that are not a tool's name."""


def check_choice(choice: str | None, names: Sequence[str] | None = None) -> str | None:
    """``choice`` if it can be used with tools ``names`` (None: not known yet).

    Raises:
        ValueError: Not a string, empty, or the name of no tool among ``names``.
    """
    if choice is None:
        return None
    if not isinstance(choice, str) or not choice.strip():
        raise ValueError(f"tool_choice must be auto, required, none or a tool's name, "
                         f"got {choice!r}")
    choice = choice.strip()
    if names is not None and choice not in KEYWORDS and choice not in names:
        listed = ", ".join(names) or "none"
        raise ValueError(f"tool_choice names the tool {choice!r}, which is not among the "
                         f"run's tools ({listed})")
    return choice


def for_step(choice: str | None, steps: Sequence[Step]) -> str | None:
    """The choice for the next step after ``steps``: ``required`` and a name become ``auto``
    once one of them has called a tool."""
    if choice is None or choice in ("auto", "none") or not any(s.calls for s in steps):
        return choice
    return "auto"


def constrain(request: ModelRequest, choice: str | None,
              tools: Sequence[ToolLike]) -> ModelRequest:
    """``request`` with ``choice`` applied: the native field, or a narrower ReAct grammar."""
    if choice is None:
        return request
    if request.tools:
        request.tool_choice = choice
    elif request.grammar is not None and choice != "auto":
        allowed = [t for t in tools if t.name == choice] if choice not in KEYWORDS else tools
        if choice == "none":
            allowed = []
        if allowed or choice == "none":  # else no grammar is left: the check below tells
            from miniagent.core.protocol.grammar import react_grammar  # loads with the first one

            request.grammar = react_grammar(allowed, final=choice == "none",
                                            max_tokens=request.max_tokens)
    return request


def enforce(parsed: ParsedOutput, choice: str | None) -> ParsedOutput:
    """``parsed``, or an invalid reply when it does what ``choice`` forbids."""
    if choice is None or choice == "auto" or parsed.kind == "invalid":
        return parsed
    error = None
    if choice == "none" and parsed.kind == "action":
        error = "no tool may be called on this step: answer with what you know"
    elif choice != "none" and parsed.kind == "final":
        which = "a tool" if choice == "required" else f"the tool '{choice}'"
        error = f"this step must call {which} before any final answer"
    elif choice not in KEYWORDS and parsed.kind == "action":
        others = sorted({c.name for c in parsed.tool_calls if c.name != choice})
        if others:
            error = f"this step must call the tool '{choice}', not {', '.join(others)}"
    if error is None:
        return parsed
    return dataclasses.replace(parsed, kind="invalid", error=error, tool_calls=[],
                               final_answer=None)

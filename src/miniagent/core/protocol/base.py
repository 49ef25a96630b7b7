"""The protocol interface (how a model expresses an action) and the tool choice every protocol
honours.

The step logic renders every request and reads every reply through one
:class:`ActionProtocol`; it never knows which one. ``react`` (text, stop words, a grammar),
``native`` (the OpenAI ``tools`` field) and ``auto`` (native, falling back to react where the
endpoint refuses tools) implement it; a new one plugs in with ``Agent(protocol=...)``, and is
registered by name (:func:`~miniagent.core.protocol.registry.register_protocol`) to run on drivers
that rebuild it elsewhere (a Temporal worker). A protocol with constructor options returns
them from an ``options()`` method, so that it is rebuilt the same.

The tool choice says whether (and which) tool the model must call on a step: ``auto`` (the
model decides), ``required`` (some tool call, no final answer), ``none`` (no tool call: answer)
or one tool's name (a call of that tool). :func:`apply_choice` puts it in the request the way
its protocol allows:

- with native tools (``native``, ``hybrid``, ``auto`` while native): the request's
  ``tool_choice`` field, which the transport sends as OpenAI's ``"auto"``, ``"required"``,
  ``"none"`` or ``{"type": "function", "function": {"name": ...}}``
  (:func:`~miniagent.core.models.openai_wire.wire_tool_choice`);
- with ReAct: the grammar, when the request carries one: ``required`` drops the Final Answer
  branch, a name leaves only that tool's Action, ``none`` only the Final Answer.

Servers and models may still disobey (no grammar, a server that ignores the field), so the
parsed reply is checked too (:func:`enforce_choice`): a reply the choice forbids becomes an
invalid one, and the model is told what the step needs. The history is not touched: the
prompt stays a prefix of the next.

``required`` and a name hold until the run's first tool call, then the choice returns to
``auto``, so the run can still end with an answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from miniagent.core.errors import ModelError
from miniagent.core.types import Message, ModelRequest, ModelResponse, ParsedOutput, Step, ToolLike

__all__ = ["CHOICE_KEYWORDS", "ActionProtocol", "apply_choice", "check_choice", "choice_for_step",
           "enforce_choice"]


class ActionProtocol(Protocol):
    """Render a request, parse a reply, tell the model about a bad reply, recover.

    A protocol matches it by its methods; one that subclasses it explicitly (the built-in
    ones) inherits ``recover``, which lets every error stand.
    """

    name: str

    def render(self, messages: Sequence[Message], tools: Sequence[ToolLike],
               instructions: str | None = None) -> ModelRequest:
        """The request for this history; pure, and a prefix of the next step's rendering."""
        ...

    def parse(self, response: ModelResponse, request: ModelRequest) -> ParsedOutput:
        """What the reply to ``request`` means: an action, a final answer, or invalid."""
        ...

    def format_error(self, error: str, tools: Sequence[ToolLike]) -> str:
        """The text sent back (as a user message) for a reply that was neither."""
        ...

    def recover(self, error: ModelError, request: ModelRequest, messages: Sequence[Message],
                tools: Sequence[ToolLike], instructions: str | None = None
                ) -> ModelRequest | None:
        """A request to send instead after ``error``, or None to let the error stand (what a
        protocol that subclasses this one does unless it says otherwise)."""
        return None


# -- the tool choice ----------------------------------------------------------------------

CHOICE_KEYWORDS = ("auto", "required", "none")
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
    if names is not None and choice not in CHOICE_KEYWORDS and choice not in names:
        listed = ", ".join(names) or "none"
        raise ValueError(f"tool_choice names the tool {choice!r}, which is not among the "
                         f"run's tools ({listed})")
    return choice


def choice_for_step(choice: str | None, steps: Sequence[Step]) -> str | None:
    """The choice for the next step after ``steps``: ``required`` and a name become ``auto``
    once one of them has called a tool."""
    if choice is None or choice in ("auto", "none") or not any(s.calls for s in steps):
        return choice
    return "auto"


def apply_choice(request: ModelRequest, choice: str | None,
                 tools: Sequence[ToolLike]) -> ModelRequest:
    """``request`` with ``choice`` applied: the native field, or a narrower ReAct grammar."""
    if choice is None:
        return request
    if request.tools:
        request.tool_choice = choice
    elif request.grammar is not None and choice != "auto":
        named = choice not in CHOICE_KEYWORDS
        allowed = [t for t in tools if t.name == choice] if named else tools
        if choice == "none":
            allowed = []
        if allowed or choice == "none":  # else no grammar is left: the check below tells
            from miniagent.core.protocol.grammar import react_grammar  # loads with the first one

            request.grammar = react_grammar(allowed, final=choice == "none",
                                            max_tokens=request.max_tokens)
    return request


def enforce_choice(parsed: ParsedOutput, choice: str | None) -> ParsedOutput:
    """``parsed``, or an invalid reply when it does what ``choice`` forbids."""
    if choice is None or choice == "auto" or parsed.kind == "invalid":
        return parsed
    error = None
    if choice == "none" and parsed.kind == "action":
        error = "no tool may be called on this step: answer with what you know"
    elif choice != "none" and parsed.kind == "final":
        which = "a tool" if choice == "required" else f"the tool '{choice}'"
        error = f"this step must call {which} before any final answer"
    elif choice not in CHOICE_KEYWORDS and parsed.kind == "action":
        others = sorted({c.name for c in parsed.tool_calls if c.name != choice})
        if others:
            error = f"this step must call the tool '{choice}', not {', '.join(others)}"
    if error is None:
        return parsed
    return dataclasses.replace(parsed, kind="invalid", error=error, tool_calls=[],
                               final_answer=None)

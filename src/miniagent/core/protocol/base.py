"""The protocol interface (how a model expresses an action) and the words of the tool choice
every protocol honours.

The step logic renders every request and reads every reply through one
:class:`ActionProtocol`; it never knows which one. ``react`` (text, stop words, a grammar),
``native`` (the OpenAI ``tools`` field) and ``auto`` (native, falling back to react where the
endpoint refuses tools) implement it; a new one plugs in with ``Agent(protocol=...)``, and is
registered by name (:func:`~miniagent.core.protocol.registry.register_protocol`) to run on drivers
that rebuild it elsewhere (a Temporal worker). A protocol with constructor options returns
them from an ``options()`` method, so that it is rebuilt the same.

The tool choice's words (:data:`CHOICE_KEYWORDS`) are written here, where the transports read
them too; what the step logic does with a choice is in :mod:`miniagent.core.runtime.guards`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from miniagent.core.errors import ModelError
from miniagent.core.types import Message, ModelRequest, ModelResponse, ParsedOutput, ToolLike

__all__ = ["CHOICE_KEYWORDS", "ActionProtocol"]


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

"""The Model interface: a transport with one async method, ``generate``, and a capabilities profile.

Every backend (HTTP server, embedded llama.cpp, scripted replay) implements it. A model
receives a request already rendered by a protocol and returns a normalised
:class:`~miniagent.core.types.ModelResponse`; it raises only
:class:`~miniagent.core.errors.ModelError` subclasses. Which protocol speaks to it is decided from
its :class:`Capabilities`, not by the model.

A model may also have an ``async warmup(request)`` method (the embedded model has one): what
:meth:`Agent.start <miniagent.core.agent.Agent.start>` calls with the first request of a run, or a
worker with ``None``, to pay a load or a prompt evaluation before the first step; and an
``is_warm()`` saying whether it still is (False after the embedded model's ``unload()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from miniagent.core.types import ModelRequest, ModelResponse, ToolMode


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a transport is configured for and known to support.

    Attributes:
        tool_mode: The protocol it was configured for: ``react``, ``native`` or ``auto``.
        native_tools: Whether it takes the ``tools`` field: True, False, or None (unknown
            until tried; ``auto`` finds out).
        grammar: Whether it honours ``ModelRequest.grammar`` (constrained decoding).
        streaming: Whether it streams: its ``generate`` then takes an ``on_delta`` keyword
            (a :data:`~miniagent.core.models.streaming.DeltaSink`) that receives the answer's
            text as it is written.
        small_model: A small model: an :class:`~miniagent.Agent` turns on its aids for
            weak models by default (a worked example in the ReAct prompt, a small tool
            selection, ...): those named by ``aids``, or every one when ``aids`` is None.
        aids: The aids this model is measured to need (names of
            :data:`~miniagent.core.runtime.run.AIDS_FOR`'s entries; the embedded model's come
            from :mod:`miniagent.core.models.profiles`). None: every aid for a small model,
            none for others.
    """

    tool_mode: ToolMode = "auto"
    native_tools: bool | None = None
    grammar: bool = False
    streaming: bool = False
    small_model: bool = False
    aids: tuple[str, ...] | None = None
    response_format: bool = False
    """Whether it takes ``response_format: {"type": "json_schema", ...}`` (a native request
    asks a typed answer that way; else with a tool whose arguments are the answer)."""

    def needed_aids(self) -> tuple[str, ...]:
        """The names of the aids an agent turns on for this model by default."""
        if self.aids is not None:
            return self.aids
        return SMALL_MODEL_AIDS if self.small_model else ()


ALL_AIDS = ("tool_selection", "worked_example", "strict_selection", "quote_answers",
            "answer_after_results", "restate_question", "ground_figures")
"""Every small-model aid, by name (see :data:`miniagent.core.runtime.run.AIDS_FOR`)."""

SMALL_MODEL_AIDS = tuple(name for name in ALL_AIDS if name != "ground_figures")
"""The aids of a small model that no measured profile names: every one but the grounded
figures, which a model's profile turns on where it was measured to help."""


@runtime_checkable
class Model(Protocol):
    """What the step logic needs from a model backend."""

    @property
    def capabilities(self) -> Capabilities:
        """The transport's profile (see :class:`Capabilities`)."""
        ...

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Run one chat completion."""
        ...

    async def aclose(self) -> None:
        """Release connections or other resources."""
        ...

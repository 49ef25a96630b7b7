"""Three of the values an :class:`~miniagent.core.agent.Agent` is made of, each a group of
settings that belong together: how each request is sampled (:class:`ModelSettings`), the aids
for a small model (:class:`Aids`) and the long-term memory it uses (:class:`MemorySettings`).

The others live with the code that reads them: :class:`~miniagent.core.runtime.guards.Limits`
(the bounds of a run) and :class:`~miniagent.core.runtime.run.Compression`. Each value checks
its numbers when it is made, so a setting that cannot work is refused before any run.

Example:
    >>> from miniagent import Agent, Aids, Limits, ModelSettings, ScriptedModel
    >>> agent = Agent(model=ScriptedModel(["Final Answer: 4"]),
    ...               model_settings=ModelSettings(temperature=0.2, max_tokens=256),
    ...               limits=Limits(max_steps=4), aids=Aids(tool_selection=3))
    >>> agent.spec.temperature, agent.spec.limits.max_steps, agent.spec.tool_selection
    (0.2, 4, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from miniagent._internal import defaults
from miniagent._internal.bounds import quantity, whole
from miniagent.core.errors import UserError

if TYPE_CHECKING:
    from miniagent.memory.sqlite import Memory

__all__ = ["Aids", "AidsPreset", "MemorySettings", "ModelSettings"]

AidsPreset = Literal["auto", "on", "off"]


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """How each model request of the agent is made.

    Attributes:
        temperature: sampling temperature (``None``: the server's default).
        max_tokens: completion tokens per request (``None``: the server's default).
        grammar: ReAct requests carry a GBNF grammar built from the tools' schemas; backends
            that support constrained decoding (the embedded llama.cpp model, or a server
            given ``grammar_field``) then only produce well-formed steps.

    Raises:
        UserError: a temperature below 0 or not finite, a ``max_tokens`` below 1.
    """

    temperature: float | None = defaults.TEMPERATURE
    max_tokens: int | None = defaults.MAX_TOKENS
    grammar: bool = True

    def __post_init__(self) -> None:
        if self.temperature is not None:
            quantity("temperature", self.temperature, least=0.0)
        if self.max_tokens is not None:
            whole("max_tokens", self.max_tokens, least=1)


@dataclass(frozen=True, kw_only=True)
class Aids:
    """Aids for a small model, and whether a step must call a tool.

    A field left ``None`` takes its default from ``preset``: ``"auto"`` turns on the aids the
    model is measured to need (``model.capabilities.needed_aids()``), ``"on"`` every aid,
    ``"off"`` none. ``Agent(aids="on")`` is short for ``Agent(aids=Aids(preset="on"))``.
    The number of rounds after which a small model must answer is a limit
    (:attr:`Limits.answer_after_results <miniagent.core.runtime.guards.Limits>`), defaulted
    the same way.

    Attributes:
        tool_selection: each request offers only this many tools, the most relevant to the
            conversation so far, plus those already called (0: all of them; see
            :mod:`miniagent.core.runtime.selection`).
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a tool's name: whether the
            model must call a tool (the native field, or the ReAct grammar); ``required`` and
            a name hold until the run's first call (:mod:`miniagent.core.protocol.base`).
        worked_example: the ReAct prompt shows one worked round with the first offered tool.
        strict_selection: the selection offers only tools the conversation matches, best
            first, none when nothing does (a question no tool is about gets a direct answer).
        act_first: while the turn has called no tool, a step that offers tools must call one.
        quote_answers: after a tool result, a ReAct Final Answer quotes a result
            (:mod:`miniagent.core.protocol.quotes`).
        restate_question: after a step's results, the last one ends with the turn's question
            and what to do next (:func:`~miniagent.core.runtime.guards.restated`).
        ground_figures: a call whose figures appear nowhere in what the model was told is
            not run, once per set of figures in a turn: it is asked to fetch them first
            (:mod:`miniagent.core.runtime.grounding`).

    Raises:
        UserError: an unknown preset, a ``tool_selection`` below 0.
    """

    preset: AidsPreset = "auto"
    tool_selection: int | None = None
    tool_choice: str | None = None
    worked_example: bool | None = None
    strict_selection: bool | None = None
    act_first: bool = False
    quote_answers: bool | None = None
    restate_question: bool | None = None
    ground_figures: bool | None = None

    def __post_init__(self) -> None:
        if self.preset not in ("auto", "on", "off"):
            raise UserError(f"aids must be auto, on or off, got {self.preset!r}")
        if self.tool_selection is not None:
            whole("tool_selection", self.tool_selection, least=0)

    @classmethod
    def of(cls, value: Aids | AidsPreset) -> Aids:
        """``value`` itself, or the aids of a preset's name."""
        return value if isinstance(value, Aids) else cls(preset=value)


@dataclass(frozen=True, kw_only=True)
class MemorySettings:
    """A long-term memory (:class:`~miniagent.memory.Memory`) and how the agent uses it.

    The model gets ``remember`` and ``recall`` tools over ``namespace`` (approval rules and
    limits apply as to any tool) and, with ``recall``, before the first step of every turn
    the memories found for the question are put before it as a marked block of data, not
    instructions (see :mod:`miniagent.core.runtime.recall`). ``Agent(memory=Memory(...))`` is
    short for ``MemorySettings(memory=Memory(...))``.
    """

    memory: Memory
    namespace: str = "default"
    recall: bool = True

    @classmethod
    def of(cls, value: Any) -> MemorySettings:
        """``value`` itself, or a memory with the default namespace and recall."""
        return value if isinstance(value, MemorySettings) else cls(memory=value)

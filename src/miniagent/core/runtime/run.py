"""A run on every driver: what it is given (the agent's spec, made into rules).

**The spec and its rules.** :class:`AgentSpec` is what an :class:`~miniagent.core.agent.Agent`
is, apart from its model, tools and store: limits (one nested value), instructions, generation
settings, the interrupted-call policy, compression, tool selection, tool choice, and its
protocol by registered name. It is plain data, so it travels (a Temporal workflow's input) and
is saved as it is. Every driver calls :func:`rules_for` with it, its tools and its model's
profile; nothing is copied field by field, and what cannot be built where the run goes (a
protocol not registered there, a tool choice naming a tool that is not there) is refused when
the run starts.

The run shell that runs the step logic on them is :func:`~miniagent.core.runtime.loop.run_session`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from miniagent._internal import defaults
from miniagent._internal.bounds import whole
from miniagent.core.errors import UserError
from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.registry import ProtocolRef, build_protocol
from miniagent.core.retry import RetryPolicy
from miniagent.core.runtime.guards import Limits, check_choice
from miniagent.core.session import InterruptedPolicy
from miniagent.core.types import ToolCall, ToolLike

__all__ = ["AIDS_FOR", "AgentSpec", "Compression", "Rules", "ToolCatalog", "rules_for",
           "with_small_model_aids"]


# -- the spec and its rules ------------------------------------------------------------------------

Unit = Literal["tokens", "chars"]
Mode = Literal["truncate", "model"]
# A pattern as text: ``re`` compiles it when Compression.of reads a size written as text.
_SIZE = r"(?i)\s*(\d[\d_,]*)\s*(c|chars?|characters|t|tokens?)?\s*"


@dataclasses.dataclass(kw_only=True, frozen=True)
class Compression:
    """When and how to compress (``Agent(compression=...)``): once the history sent to the
    model crosses ``at`` (estimated tokens, or characters with ``unit="chars"``;
    :meth:`of` reads ``"12000c"``), the oldest rounds are replaced by one summary block and
    the last ``keep_last`` rounds stay whole; ``mode`` says who writes the summary:
    ``"truncate"`` (results cut to about ``observation_chars``) or ``"model"`` (the model).
    See :mod:`miniagent.core.runtime.compress`, which loads only for an agent that compresses;
    the setting lives here, with the spec that holds it.

    Raises:
        UserError: a size below 1, a ``keep_last`` below 1, an unknown mode.
    """

    at: int
    unit: Unit = "tokens"
    keep_last: int = 4
    mode: Mode = "truncate"
    observation_chars: int = 200
    summary_tokens: int = 512
    """``max_tokens`` of the model's summary (``model`` mode)."""

    def __post_init__(self) -> None:
        if isinstance(self.at, str):
            raise UserError(f"Compression(at={self.at!r}): a size written as text is read by "
                            f"Compression.of({self.at!r})")
        _threshold(self.at)
        whole("keep_last", self.keep_last, least=1)  # the latest round stays whole
        if self.mode not in ("truncate", "model"):
            raise UserError(f"compress must be 'truncate' or 'model', got {self.mode!r}")

    @classmethod
    def of(cls, compress_at: int | str, *, keep_last: int = 4, mode: str = "truncate"
           ) -> Compression:
        """The setting from a size: an int is estimated tokens, ``"12000c"`` characters
        (``"8000t"`` tokens again). Raises UserError for a setting that cannot work."""
        at, unit = _threshold(compress_at)
        return cls(at=at, unit=unit, keep_last=keep_last, mode=mode)  # type: ignore[arg-type]


def _threshold(value: int | str) -> tuple[int, Unit]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UserError(f"compress_at must be an int (tokens) or a string such as '12000c' "
                        f"(characters), got {value!r}")
    if isinstance(value, int):
        at, unit = value, "tokens"
    else:
        m = re.fullmatch(_SIZE, value)
        if m is None:
            raise UserError(f"compress_at {value!r} is not a size: write e.g. 8000 (tokens), "
                            "'8000t' or '12000c' (characters)")
        at = int(m.group(1).replace("_", "").replace(",", ""))
        unit = "chars" if (m.group(2) or "t").lower().startswith("c") else "tokens"
    if at < 1:
        raise UserError(f"compress_at must be positive, got {value!r}")
    return at, unit  # type: ignore[return-value]


class ToolCatalog(Protocol):
    """What the step logic needs of a run's tools (a
    :class:`~miniagent.core.tools.toolbox.Toolbox` is one): what to offer, and how to judge a call
    without running it."""

    @property
    def names(self) -> list[str]: ...

    def listed(self) -> Sequence[ToolLike]:
        """The tools offered to the model, in order."""
        ...

    def needs_approval(self, call: ToolCall) -> bool: ...

    def is_idempotent(self, name: str) -> bool: ...


@dataclass(kw_only=True)
class AgentSpec:
    """An agent's configuration as the step logic reads it, on every driver."""

    limits: Limits = field(default_factory=Limits)
    protocol: ProtocolRef = field(default_factory=ProtocolRef)
    """By registered name; ``ProtocolRef()``: the one the model is configured for."""
    instructions: str | None = None
    temperature: float | None = defaults.TEMPERATURE
    max_tokens: int | None = defaults.MAX_TOKENS
    on_interrupted: InterruptedPolicy = "ask"
    compression: Compression | None = None
    """Context compression (see :mod:`miniagent.core.runtime.compress`); ``None``: off."""
    tool_selection: int | None = None
    """Offer each request only this many tools, the most relevant (see runtime/selection.py)."""
    strict_selection: bool = False
    """With ``tool_selection``: offer only the tools the conversation matches, none when
    nothing does (see :func:`~miniagent.core.runtime.selection.select_tools`)."""
    tool_choice: str | None = None
    """auto, required, none or a tool's name (see :mod:`miniagent.core.protocol.base`)."""
    act_first: bool = False
    """When a turn's step offers tools and none has been called yet in the turn, the step must
    call one (``required``), unless ``tool_choice`` says otherwise."""
    quote_answers: bool = False
    """After a tool result in the turn, a ReAct grammar admits only a Final Answer quoted from
    the results (see :mod:`miniagent.core.protocol.quotes`); the model may still act again."""
    restate_question: bool = False
    """After a step whose calls gave a result, its last observation ends with the turn's
    question and what to do next (see :func:`~miniagent.core.runtime.guards.restated`)."""
    ground_figures: bool = False
    """A call whose figures appear nowhere in what the model was told is answered, once per
    set of figures in a turn, with an observation that asks to fetch them first (see
    :mod:`miniagent.core.runtime.grounding`)."""
    recall: str | None = None
    """The tool called with each turn's question before its first step, whose block the model
    then sees with the question (a memory's ``recall``: :mod:`miniagent.core.runtime.recall`);
    ``None``: nothing is recalled."""
    tool_retry: RetryPolicy | None = None
    """The retry policy of the tools that set none (see :mod:`miniagent.core.retry`); every
    call's :class:`~miniagent.core.types.ToolContext` carries it to the executor."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema every answer must fit (``Agent(output_type=...)``; a turn may give its
    own: :mod:`miniagent.core.runtime.output`); None: a free answer."""
    response_format: bool = False
    """The model takes ``response_format`` (``json_schema``): a native request asks a typed
    answer that way, else with a ``final_result`` tool."""
    aids_from_model: tuple[str, ...] = ()
    """The small-model aids (names of :data:`AIDS_FOR`'s entries) that an agent built without
    its model left to their defaults: a Temporal client's, whose workers' model is the one
    that decides them. The fields hold the defaults of a model that is not small; where the
    model is small (``capabilities.small_model``) they are turned on
    (:func:`with_small_model_aids`: a Temporal session asks its worker once)."""

    def replace(self, **changes: object) -> AgentSpec:
        """A copy with ``changes`` (limits may be given as a dict of the fields to change); an
        aid changed here is no longer left to the model (:attr:`aids_from_model`)."""
        limits = changes.get("limits")
        if self.aids_from_model and "aids_from_model" not in changes:
            given = set(changes)
            if "limits" in changes and (not isinstance(limits, dict)
                                        or "answer_after_results" in limits):
                given.add("answer_after_results")  # a whole Limits, or that field, sets it
            if "protocol" in changes:
                given.add("worked_example")  # a protocol has its own worked example
            changes["aids_from_model"] = tuple(
                name for name in self.aids_from_model if name not in given)
        if isinstance(limits, dict):
            changes["limits"] = dataclasses.replace(self.limits, **limits)
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(kw_only=True)
class Rules:
    """What the step logic decides with: the spec, its protocol built, and the run's tools."""

    spec: AgentSpec
    protocol: ActionProtocol
    tools: ToolCatalog


AIDS_FOR: dict[bool, dict[str, object]] = {
    True: {"tool_selection": defaults.SMALL_MODEL_TOOLS, "worked_example": True,
           "strict_selection": True, "quote_answers": True,
           "answer_after_results": defaults.SMALL_MODEL_ROUNDS, "restate_question": True,
           "ground_figures": True},
    False: {"tool_selection": None, "worked_example": False, "strict_selection": False,
            "quote_answers": False, "answer_after_results": None, "restate_question": False,
            "ground_figures": False},
}
"""The small-model aids' defaults for a small model (True) and for others (False)."""


def with_small_model_aids(spec: AgentSpec, names: Iterable[str] | None = None) -> AgentSpec:
    """``spec`` with the aids it left to the model (:attr:`AgentSpec.aids_from_model`) that
    the model needs (``names``; None: every aid but the figure check, as
    :data:`~miniagent.core.models.base.SMALL_MODEL_AIDS` says for a small model no profile
    names) at their defaults for a small model; the others stay off."""
    small = AIDS_FOR[True]
    wanted = set(small) - {"ground_figures"} if names is None else set(names)
    changes: dict[str, object] = {}
    for name in spec.aids_from_model:
        if name not in wanted:
            continue
        if name == "answer_after_results":
            changes["limits"] = {name: small[name]}
        elif name == "worked_example":
            changes["protocol"] = dataclasses.replace(
                spec.protocol, options={**spec.protocol.options, "example": small[name]})
        elif name in small:
            changes[name] = small[name]
    return spec.replace(aids_from_model=(), **changes)


def rules_for(spec: AgentSpec, tools: ToolCatalog, *, tool_mode: str = "auto",
              native_tools: bool | None = None, protocol: ActionProtocol | None = None
              ) -> Rules:
    """The rules of a run of ``spec`` over ``tools``, the same on every driver.

    Args:
        spec: The agent's description.
        tools: The run's tools, listed once.
        tool_mode, native_tools: The model's profile, for a spec that names no protocol.
        protocol: The protocol object itself, where the driver has it (in process: the
            agent's own, which keeps what it learnt of the endpoint between runs).

    Raises:
        UserError: the protocol is not registered here, ``tool_choice`` or ``recall`` names
            a tool the run does not have, or a typed agent has a tool named ``final_result``.
    """
    if protocol is None:
        protocol = build_protocol(spec.protocol, tool_mode=tool_mode, native_tools=native_tools)
    try:  # a name the run lacks would make every reply invalid until max_steps
        check_choice(spec.tool_choice, tools.names)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if spec.output_schema is not None and "final_result" in tools.names:
        raise UserError("a tool is named 'final_result', the name a typed answer is given "
                        "under on a native request: rename the tool, or drop output_type")
    if spec.recall is not None and spec.recall not in tools.names:
        raise UserError(f"the agent recalls memories with the tool {spec.recall!r}, which this "
                        "run does not have (a Temporal worker must serve the agent's memory)")
    return Rules(spec=spec, protocol=protocol, tools=tools)

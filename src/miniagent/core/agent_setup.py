"""How :class:`~miniagent.core.agent.Agent`'s arguments become its parts: its tool sources
(its own functions apart from other sources, plus the memory's tools), its protocol and its
:class:`~miniagent.core.runtime.run.AgentSpec` (the small-model aids chosen for its model),
and its trace file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from miniagent.core.errors import UserError
from miniagent.core.models.base import ALL_AIDS, Model
from miniagent.core.output import OutputType
from miniagent.core.protocol.base import ActionProtocol
from miniagent.core.protocol.registry import ProtocolRef, default_protocol, protocol_ref
from miniagent.core.retry import RetryPolicy
from miniagent.core.runtime.guards import Limits, check_choice
from miniagent.core.runtime.run import AIDS_FOR, AgentSpec, Compression
from miniagent.core.session import InterruptedPolicy
from miniagent.core.settings import Aids, MemorySettings, ModelSettings
from miniagent.core.tools.tool import Tool

if TYPE_CHECKING:
    from miniagent.core.tools.toolbox import ToolRegistry, ToolSource
    from miniagent.core.trace.jsonl import JsonlTracer

ToolItem: TypeAlias = "Tool | Callable[..., Any] | ToolSource"
"""What ``Agent(tools=...)`` takes: tools, plain functions, tool sources (the tool executor,
:mod:`miniagent.core.tools.toolbox`, and the event loop load with the first agent made)."""


@dataclasses.dataclass(kw_only=True)
class Described:
    """What the agent is, read from its arguments."""

    spec: AgentSpec
    protocol: ActionProtocol | None
    """None: an agent without a model, whose workers' model decides the protocol."""
    output: OutputType | None = None
    """What every answer must be (None: free text)."""


def describe(*, model: Model | None, protocol: ActionProtocol | None,
             instructions: str | None, settings: ModelSettings, limits: Limits,
             compression: Compression | None, aids: Aids, memory: MemorySettings | None,
             tool_retry: RetryPolicy | int | None, on_interrupted: InterruptedPolicy,
             names: list[str] | None, output: Any = None) -> Described:
    """The agent's spec and protocol (``names``: its tools' names, None where other sources
    add tools only known at run time).

    Raises:
        UserError: a ``tool_choice`` that names none of the tools, an ``output`` type with no
            JSON Schema.
    """
    typed = None if output is None else OutputType.of(output)
    chosen, from_model = _chosen_aids(model, aids, limits, protocol)
    if protocol is None and model is not None:
        caps = model.capabilities
        # a grammar is built only for a model that takes one (another would drop it unread)
        protocol = default_protocol(caps.tool_mode, native_tools=caps.native_tools,
                                    grammar=settings.grammar and caps.grammar,
                                    max_tokens=settings.max_tokens,
                                    example=chosen["worked_example"])
    spec = AgentSpec(
        limits=dataclasses.replace(limits, answer_after_results=chosen["answer_after_results"]),
        protocol=protocol_ref(protocol) if protocol is not None else ProtocolRef(
            options={"grammar": settings.grammar, "max_tokens": settings.max_tokens,
                     "example": chosen["worked_example"]}),
        instructions=instructions, temperature=settings.temperature,
        max_tokens=settings.max_tokens, on_interrupted=on_interrupted, compression=compression,
        tool_selection=chosen["tool_selection"], strict_selection=chosen["strict_selection"],
        quote_answers=chosen["quote_answers"], act_first=aids.act_first,
        restate_question=chosen["restate_question"], ground_figures=chosen["ground_figures"],
        tool_choice=_checked_choice(aids.tool_choice, names),
        recall="recall" if memory is not None and memory.recall else None,
        tool_retry=RetryPolicy.of(tool_retry), aids_from_model=from_model,
        output_schema=None if typed is None else typed.schema,
        response_format=model is not None and model.capabilities.response_format)
    return Described(spec=spec, protocol=protocol, output=typed)


def _chosen_aids(model: Model | None, aids: Aids, limits: Limits,
                 protocol: ActionProtocol | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Each aid as given, else its default for a small model where the model needs it, else
    off (a selection or a number of rounds of 0 means none); and, for an agent without its
    model (wrapped for Temporal), the aids left to the workers' model to decide."""
    preset = aids.preset
    needed = set(ALL_AIDS if preset == "on" else () if preset == "off" or model is None
                 else model.capabilities.needed_aids())
    given = dict(tool_selection=aids.tool_selection, worked_example=aids.worked_example,
                 strict_selection=aids.strict_selection, quote_answers=aids.quote_answers,
                 answer_after_results=limits.answer_after_results,
                 restate_question=aids.restate_question, ground_figures=aids.ground_figures)
    chosen = {name: AIDS_FOR[name in needed][name] if value is None else value
              for name, value in given.items()}
    for name in ("tool_selection", "answer_after_results"):
        chosen[name] = chosen[name] or None
    # a protocol given here has its own worked example
    from_model = () if model is not None or preset != "auto" else tuple(
        name for name, value in given.items()
        if value is None and (name != "worked_example" or protocol is None))
    return chosen, from_model


def _checked_choice(choice: str | None, names: list[str] | None) -> str | None:
    try:
        return check_choice(choice, names)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def split_tools(tools: ToolRegistry | Iterable[ToolItem]
                ) -> tuple[ToolRegistry, list[ToolSource]]:
    """The agent's own tools (functions, schema tools) apart from other tool sources."""
    from miniagent.core.tools.toolbox import ToolRegistry, ToolSource

    if isinstance(tools, ToolRegistry):
        return tools, []
    own: list[Tool | Callable[..., Any]] = []
    sources: list[ToolSource] = []
    for item in tools:
        if isinstance(item, ToolRegistry) or (
                not isinstance(item, Tool) and isinstance(item, ToolSource)):
            sources.append(item)
        else:
            own.append(item)
    return ToolRegistry(own), sources


def memory_source(memory: MemorySettings, model: Model | None) -> ToolSource:
    """The ``remember`` and ``recall`` tools over the memory's namespace, which the memory
    makes (their modules load only for an agent with a memory); the model's credentials are
    never stored nor shown."""
    from miniagent.core.trace.redact import model_secrets

    return memory.memory.tool_source(memory.namespace, secrets=model_secrets(model))


def tracer_for(trace: str | os.PathLike[str], model: Model | None) -> JsonlTracer:
    """The JSONL trace file's subscriber (its modules load only for an agent that traces)."""
    from miniagent.core.models.describe import describe_model
    from miniagent.core.trace.jsonl import JsonlTracer
    from miniagent.core.trace.redact import model_secrets

    return JsonlTracer(trace, secrets=model_secrets(model) if model else (),
                       model=describe_model(model).name if model else None)

"""The Agent says what it is in a few values (issue 34): at most 15 parameters, no Temporal
branch, and the settings it took one by one before now arrive grouped."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import miniagent
from miniagent import (
    Agent,
    Aids,
    Compression,
    Limits,
    MemorySettings,
    ModelSettings,
    ScriptedModel,
)
from miniagent.core.errors import UserError

AGENT_SOURCE = Path(miniagent.__file__).parent / "core" / "agent.py"


def test_the_agent_takes_at_most_15_parameters() -> None:
    parameters = inspect.signature(Agent.__init__).parameters
    taken = [name for name in parameters if name != "self"]  # what a caller can give
    assert len(taken) <= 15, taken
    assert all(p.kind is p.KEYWORD_ONLY for name, p in parameters.items() if name != "self")


def test_the_agent_knows_no_driver_but_its_own() -> None:
    source = AGENT_SOURCE.read_text(encoding="utf-8")
    assert "temporal" not in source.replace("miniagent.temporal.TemporalAgent", "")
    assert len(source.splitlines()) <= 500


def test_each_value_reaches_the_spec() -> None:
    memory = miniagent.Memory()  # in memory: nothing on disk
    agent = Agent(model=ScriptedModel([]), instructions="Be brief.",
                  model_settings=ModelSettings(temperature=0.5, max_tokens=99, grammar=False),
                  limits=Limits(max_steps=3, approval_timeout=60, answer_after_results=2),
                  compression=Compression.of("9000c", keep_last=2, mode="model"),
                  aids=Aids(preset="off", tool_selection=4, act_first=True),
                  memory=MemorySettings(memory=memory, namespace="ann", recall=False))
    spec = agent.spec
    assert (spec.temperature, spec.max_tokens, spec.protocol.options.get("grammar")) == (
        0.5, 99, False)
    assert (spec.limits.max_steps, spec.limits.approval_timeout,
            spec.limits.answer_after_results) == (3, 60, 2)
    assert (spec.compression.at, spec.compression.unit, spec.compression.keep_last,
            spec.compression.mode) == (9000, "chars", 2, "model")  # type: ignore[union-attr]
    assert (spec.tool_selection, spec.act_first, spec.strict_selection) == (4, True, False)
    assert spec.recall is None and "recall" in agent.sources[-1].names  # type: ignore[attr-defined]
    memory.close()


def test_a_memory_alone_recalls_in_the_default_namespace() -> None:
    memory = miniagent.Memory()
    agent = Agent(model=ScriptedModel([]), memory=memory)
    assert agent.memory == MemorySettings(memory=memory)
    assert agent.spec.recall == "recall"
    memory.close()


def test_a_preset_name_and_its_value_are_the_same_aids() -> None:
    assert Agent(model=ScriptedModel([]), aids="on").spec == Agent(
        model=ScriptedModel([]), aids=Aids(preset="on")).spec


@pytest.mark.parametrize(("make", "message"), [
    (lambda: ModelSettings(max_tokens=0), "max_tokens must be at least 1"),
    (lambda: Aids(preset="maybe"), "aids must be auto, on or off"),  # type: ignore[arg-type]
    (lambda: Compression(at="12000c"), r"Compression\.of\('12000c'\)"),  # type: ignore[arg-type]
    (lambda: Compression(at=100, mode="zip"), "compress must be 'truncate' or 'model'"),
    (lambda: Limits(approval_timeout=0), "approval_timeout must be a positive number"),
])
def test_each_value_refuses_a_setting_that_cannot_work(make: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        make()  # type: ignore[operator]


def test_an_agent_without_a_model_is_refused_where_it_would_run() -> None:
    agent = Agent()  # fine: a TemporalAgent's workers serve the model
    with pytest.raises(UserError, match="needs a model"):
        agent.run("q")
    with pytest.raises(UserError, match="needs a model"):
        agent.resume("s")
    assert list(agent.store.list()) == []  # nothing was saved for a run that could not start

"""The embedded model's warm-up: ``Agent.start()`` loads it and evaluates the prompt of the first
request as the step logic renders it, so the first step finds the system prompt in the KV cache
(its ``cached_tokens`` above 0); without a start the first step of a fresh model caches nothing.
Real llama.cpp (xllamacpp) with the packaged SmolLM2; skipped when either is missing."""

from __future__ import annotations

import pytest

from embedded_model import model_path
from miniagent import Agent, Limits, ModelSettings
from miniagent.core.models.local import LocalModel
from miniagent.core.tools.calculator import calculator


@pytest.mark.parametrize("tool_mode", ["react", "native"])
async def test_the_first_step_after_start_hits_the_prompt_cache(tool_mode: str) -> None:
    path = model_path()
    options = dict(tools=[calculator], limits=Limits(max_steps=1),
                   model_settings=ModelSettings(max_tokens=24),
                   instructions="Answer arithmetic questions with the calculator.")

    cold = Agent(model=LocalModel(path, tool_mode=tool_mode), **options)  # type: ignore[arg-type]
    result = await cold.arun("What is 17 * 3?")
    assert result.steps[0].usage.prompt_tokens > 0
    assert result.steps[0].usage.cached_tokens == 0  # a fresh model: nothing in its cache

    model = LocalModel(path, tool_mode=tool_mode)  # type: ignore[arg-type]
    agent = Agent(model=model, **options)  # type: ignore[arg-type]
    report = await agent.start()
    assert report.ok and report.warmed == [f"model {path.name}"], report
    assert model.loaded
    result = await agent.arun("What is 17 * 3?")
    first = result.steps[0].usage
    assert 0 < first.cached_tokens < first.prompt_tokens  # the system prompt, not the question
    model.unload()
    cold.model.unload()  # type: ignore[union-attr]


async def test_an_unloaded_model_is_cold_again_at_the_next_start() -> None:
    model = LocalModel(model_path())
    agent = Agent(model=model, tools=[calculator])
    try:
        assert (await agent.start()).warmed == [f"model {model.model_path.name}"]
        model.unload()
        report = await agent.start()
        assert [o.status for o in report.outcomes] == ["warmed"]  # not "already_warm"
        assert model.loaded
    finally:
        model.unload()

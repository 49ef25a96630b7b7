"""Typed results on the embedded model (issue 35): a ReAct Final Answer constrained by the
schema's grammar, so SmolLM2-135M, a model that rarely writes valid JSON unaided, gives an
answer that validates on every run. Skipped where the model or its runtime is not installed."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from embedded_model import model_path
from miniagent import Agent, Limits, ModelSettings
from miniagent.core.models.catalog import user_cache_dir

QUESTIONS = [
    "Ana is 31 years old.", "Bo is 7.", "Chen turned 45 today.", "Dita, aged 19.",
    "Eli is 62 years old.", "Fay is 3.", "Gus will be 28 next week.", "Hana, 54.",
    "Ivo is 88 years old.", "Jun is 12.",
]


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int


def test_ten_runs_of_the_embedded_model_all_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    model_path()  # skips without the runtime
    path = user_cache_dir() / "smollm2-135m.gguf"
    if not path.exists():
        pytest.skip(f"{path} is not installed (miniagent model install smollm2-135m)")
    monkeypatch.setenv("MINIAGENT_THREADS", "1")
    from miniagent.core.models.local import LocalModel

    agent = Agent(model=LocalModel(path, n_ctx=2048), output_type=Person,
                  instructions="Read the person's name and age from the question.",
                  model_settings=ModelSettings(max_tokens=64),
                  limits=Limits(max_steps=3))
    results = [agent.run(question) for question in QUESTIONS]
    assert [r.status for r in results] == ["completed"] * 10, [r.reason for r in results]
    assert all(isinstance(r.output, Person) for r in results)
    # the first answer of every run fit: the grammar left nothing to repair
    assert [len(r.steps) for r in results] == [1] * 10

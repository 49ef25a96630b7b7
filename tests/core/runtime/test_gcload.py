"""The collector's tuning while many runs are in flight (RunLoad, runtime/inprocess.py)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from miniagent import Agent, ScriptedModel
from miniagent.core.runtime import inprocess
from miniagent.core.runtime.inprocess import GC_BUSY, GC_YOUNG, RunLoad
from miniagent.core.types import ModelRequest, ModelResponse


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def enter(load: RunLoad, stack: ExitStack, runs: int) -> None:
    for _ in range(runs):
        stack.enter_context(load.run())


def test_thresholds_rise_past_busy_and_come_back_below_half() -> None:
    load = RunLoad()
    with ExitStack() as outer:
        with ExitStack() as inner:
            enter(load, outer, GC_BUSY // 2)
            enter(load, inner, GC_BUSY // 2 - 1)
            assert gc.get_threshold() == (700, 10, 10)
            enter(load, inner, 1)
            assert load.runs == GC_BUSY
            assert gc.get_threshold() == (GC_YOUNG, 10, 10)
        assert load.runs == GC_BUSY // 2  # hysteresis: still raised at half
        assert gc.get_threshold() == (GC_YOUNG, 10, 10)
        with load.run():
            pass
    assert load.runs == 0
    assert gc.get_threshold() == (700, 10, 10)


def test_a_threshold_changed_meanwhile_is_kept() -> None:
    load = RunLoad()
    with ExitStack() as stack:
        enter(load, stack, GC_BUSY)
        assert gc.get_threshold()[0] == GC_YOUNG
        gc.set_threshold(1234, 5, 5)  # the application's own choice
    assert gc.get_threshold() == (1234, 5, 5)


@pytest.mark.parametrize("setup", ["disabled", "switched_off", "already_high"])
def test_left_alone(setup: str, monkeypatch: pytest.MonkeyPatch) -> None:
    load = RunLoad()
    expected = (700, 10, 10)
    if setup == "already_high":
        expected = (GC_YOUNG * 2, 10, 10)
        gc.set_threshold(*expected)
    if setup == "switched_off":
        monkeypatch.setattr(inprocess, "gc_tuning", False)
    was_enabled = gc.isenabled()
    if setup == "disabled":
        gc.disable()
    try:
        with ExitStack() as stack:
            enter(load, stack, GC_BUSY + 1)
            assert gc.get_threshold() == expected
    finally:
        if was_enabled:
            gc.enable()
    assert gc.get_threshold() == expected


class SlowModel(ScriptedModel):
    """Answers after a pause, noting the load it saw: the runs overlap."""

    seen: list[tuple[int, int]]

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.seen.append((inprocess.run_load.runs, gc.get_threshold()[0]))
        await asyncio.sleep(0.01)
        return await super().generate(request)


def test_in_process_runs_count_while_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrent in-process runs raise the threshold while they are in flight and put it
    back when they are done."""
    monkeypatch.setattr(inprocess, "GC_BUSY", 4)
    model = SlowModel(["Final Answer: ok"] * 6)
    model.seen = []
    agent = Agent(model=model)

    async def main() -> list[str]:
        results = await asyncio.gather(*(agent.arun(f"q{i}") for i in range(6)))
        return [r.status for r in results]

    assert asyncio.run(main()) == ["completed"] * 6
    assert inprocess.run_load.runs == 0
    assert gc.get_threshold() == (700, 10, 10)
    assert max(runs for runs, _ in model.seen) == 6
    assert max(threshold for _, threshold in model.seen) == GC_YOUNG

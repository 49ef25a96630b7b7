"""Running an eval: every task, in every mode, ``repeat`` times, through the normal Agent.

Modes run one after the other (each gets its own model, closed at the end of the mode); the
runs of a mode go ``concurrency`` at a time. Each finished run is scored at once and appended
to the results file (when the eval has a folder), so a crashed eval resumes with what is
missing; each run's events go to its own JSONL trace in that folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from miniagent._internal import defaults
from miniagent.core.agent import Agent
from miniagent.core.errors import UserError
from miniagent.core.models.base import Model
from miniagent.core.runtime.guards import Limits
from miniagent.core.settings import Aids, ModelSettings
from miniagent.core.store.base import InMemoryStore
from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.core.types import RunResult, TokenUsage
from miniagent.evals.calls import score_calls
from miniagent.evals.checks import Checker, check_answer
from miniagent.evals.faults import FaultLog, ToolFaults
from miniagent.evals.results import TRACES, ResultsFile, run_key
from miniagent.evals.tasks import EvalTask

ModelFactory = Callable[[str], Model]
"""Builds the model for one mode (``react``, ``native``, ``auto``)."""


@dataclass(kw_only=True)
class EvalConfig:
    """How an eval runs. ``out`` is the folder of results and traces (None: keep nothing)."""

    modes: list[str] = field(default_factory=lambda: ["react"])
    repeat: int = 1
    concurrency: int = 1
    max_steps: int = defaults.MAX_STEPS
    max_tokens: int | None = defaults.MAX_TOKENS
    temperature: float | None = defaults.TEMPERATURE
    timeout: float | None = None
    grammar: bool = True
    faults: ToolFaults = field(default_factory=ToolFaults)
    out: Path | None = None
    fresh: bool = False
    trace: bool = True
    """Write each run's events to ``out/traces/MODE-REPEAT-ID.jsonl`` (with ``out``)."""
    agent_options: dict[str, Any] = field(default_factory=dict)
    """More settings of the agent, each by its field's name in
    :class:`~miniagent.core.settings.Aids` or :class:`~miniagent.core.runtime.guards.Limits`
    (``worked_example``, ``tool_selection``, ``answer_after_repeat``, ...); part of the
    identity."""
    label: dict[str, Any] = field(default_factory=dict)
    """What identifies the model and tools (recorded; a rerun must match it to resume)."""

    def identity(self) -> dict[str, Any]:
        """What results depend on besides the task itself (each result records its task's
        digest, so a changed task runs again and a new one runs for the first time)."""
        return {"max_steps": self.max_steps,
                "max_tokens": self.max_tokens, "temperature": self.temperature,
                "grammar": self.grammar, "seed": self.faults.seed,
                "tool_failure_rate": self.faults.rate, "tool_latency": self.faults.latency,
                **self.agent_options, **self.label}


@dataclass(kw_only=True)
class EvalHooks:
    """Optional progress callbacks."""

    on_start: Callable[[int, int], None] | None = None
    """Called once with (runs to do now, runs already done)."""
    on_result: Callable[[dict[str, Any]], None] | None = None


async def arun_eval(tasks: Sequence[EvalTask], config: EvalConfig, *, model_for: ModelFactory,
                    tools: ToolRegistry, checkers: Mapping[str, Checker] | None = None,
                    hooks: EvalHooks | None = None) -> list[dict[str, Any]]:
    """Run (or finish) the eval; returns one result per task run, in task order."""
    hooks = hooks or EvalHooks()
    store = ResultsFile(config.out) if config.out is not None else None
    saved = store.open(config.identity(), fresh=config.fresh) if store else {}
    digests = {t.id: task_digest(t) for t in tasks}
    done = {key: r for key, r in saved.items()
            if digests.get(str(r.get("id"))) == r.get("task_sha")}
    plan = [(mode, r, t) for mode in config.modes for r in range(config.repeat) for t in tasks]
    todo = [item for item in plan if run_key(item[0], item[1], item[2].id) not in done]
    if hooks.on_start:
        hooks.on_start(len(todo), len(plan) - len(todo))
    results = dict(done)
    for mode in config.modes:
        runs = [(r, t) for m, r, t in todo if m == mode]
        if runs:
            await _run_mode(mode, runs, results, config, model_for=model_for, tools=tools,
                            checkers=checkers or {}, hooks=hooks, store=store)
    return [results[run_key(m, r, t.id)] for m, r, t in plan]


async def _run_mode(mode: str, runs: list[tuple[int, EvalTask]],
                    results: dict[str, dict[str, Any]], config: EvalConfig, *,
                    model_for: ModelFactory, tools: ToolRegistry,
                    checkers: Mapping[str, Checker], hooks: EvalHooks,
                    store: ResultsFile | None) -> None:
    """The runs of one mode, ``concurrency`` at a time, on one model closed at the end."""
    model = model_for(mode)
    slots = asyncio.Semaphore(config.concurrency)

    async def one(repeat: int, task: EvalTask) -> None:
        async with slots:
            record = await _run_one(task, mode, repeat, model, tools, config, checkers)
        results[record["key"]] = record
        if store:
            store.append(record)
        if hooks.on_result:
            hooks.on_result(record)

    try:
        await asyncio.gather(*(one(r, t) for r, t in runs))
    finally:
        await model.aclose()


def run_eval(tasks: Sequence[EvalTask], config: EvalConfig, *, model_for: ModelFactory,
             tools: ToolRegistry, checkers: Mapping[str, Checker] | None = None,
             hooks: EvalHooks | None = None) -> list[dict[str, Any]]:
    """Synchronous :func:`arun_eval`."""
    return asyncio.run(arun_eval(tasks, config, model_for=model_for, tools=tools,
                                 checkers=checkers, hooks=hooks))


async def _run_one(task: EvalTask, mode: str, repeat: int, model: Model, tools: ToolRegistry,
                   config: EvalConfig, checkers: Mapping[str, Checker]) -> dict[str, Any]:
    key = run_key(mode, repeat, task.id)
    run_tools, log = config.faults.wrap(tools, key)
    trace_name = None
    if config.out is not None and config.trace:
        trace_name = f"{TRACES}/{mode}-{repeat}-{_safe(task.id)}.jsonl"
        (config.out / trace_name).unlink(missing_ok=True)  # a crashed run's partial trace
    agent = Agent(model=model, tools=run_tools, store=InMemoryStore(),
                  trace=config.out / trace_name if config.out and trace_name else None,
                  **_settings(config))
    started = time.perf_counter()
    try:
        result = await agent.arun(task.input, metadata={"eval": key})
    finally:
        # the tool sources close; the model stays open for the mode's other runs
        await asyncio.gather(*(source.aclose() for source in agent.sources),
                             return_exceptions=True)
        if agent.tracer is not None:
            agent.tracer.close()
    wall = time.perf_counter() - started
    return score_run(task, result, mode=mode, repeat=repeat, tools=tools, log=log,
                     wall_time=wall, checkers=checkers, trace=trace_name)


def _settings(config: EvalConfig) -> dict[str, Any]:
    """The agent's values from the eval's settings and its ``agent_options``.

    Raises:
        UserError: an option that is no field of ``Aids`` or ``Limits``.
    """
    options = dict(config.agent_options)
    aids = {f.name: options.pop(f.name) for f in fields(Aids) if f.name in options}
    limits = {f.name: options.pop(f.name) for f in fields(Limits) if f.name in options}
    if options:
        raise UserError(f"unknown agent options of the eval: {', '.join(sorted(options))} "
                        "(give fields of Aids or Limits)")
    return dict(model_settings=ModelSettings(temperature=config.temperature,
                                             max_tokens=config.max_tokens,
                                             grammar=config.grammar),
                limits=Limits(**{"max_steps": config.max_steps, "timeout": config.timeout,
                                 **limits}),
                aids=Aids(**aids))


def score_run(task: EvalTask, result: RunResult, *, mode: str, repeat: int,
              tools: ToolRegistry, log: FaultLog, wall_time: float,
              checkers: Mapping[str, Checker], trace: str | None) -> dict[str, Any]:
    """One task run as a JSON-ready record: its score, its costs, the faults in it."""
    correct, note = check_answer(result.final_answer, task.expected, checkers)
    calls = score_calls(task, result, tools)
    parse_failures = sum(1 for step in result.steps if step.error)
    tool_errors = sum(1 for step in result.steps for o in step.observations if o.is_error)
    met = parse_failures > 0 or tool_errors > 0
    return {
        "key": run_key(mode, repeat, task.id), "id": task.id, "task_sha": task_digest(task),
        "mode": mode, "repeat": repeat,
        "category": task.category, "tags": task.tags, "input": task.input,
        "expected": task.expected.answer, "final_answer": result.final_answer,
        "correct": correct, "check_note": note, "tool_calls_correct": calls.correct,
        "status": result.status, "reason": result.reason, "steps": len(result.steps),
        "tokens": run_tokens(result.usage),
        "wall_time": round(wall_time, 4),
        "calls_made": calls.made, "invalid_calls": calls.invalid, "calls": calls.valid,
        "parse_failures": parse_failures, "tool_errors": tool_errors,
        "met_error": met, "self_repaired": met and correct,
        "faults_injected": log.as_dict(), "trace": trace,
    }


def run_tokens(usage: TokenUsage) -> dict[str, Any]:
    """A run's tokens as reported; null when the server reported none, with ``estimated``."""
    counts = {"prompt": usage.prompt_tokens, "completion": usage.completion_tokens,
              "cached": usage.cached_tokens}
    return counts if usage.known else {**counts, "estimated": usage.estimated_tokens}


def task_digest(task: EvalTask) -> str:
    """A short digest of a task's definition (a result is reused only for the same task)."""
    text = json.dumps(task.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _safe(name: str) -> str:
    """A task id as a file name part (ids are the user's text)."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]
    return cleaned + "-" + hashlib.sha1(name.encode()).hexdigest()[:6]

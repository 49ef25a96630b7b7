"""Tool tasks on the embedded llama.cpp model, with and without the ReAct grammar.

For each mode, prints per task: status, success (the expected text is in the final answer),
steps, tokens, parse failures; then the parse-failure rate, task success, and prefix reuse:
the prompt-processing time of later steps against the first (append-only history lets
llama.cpp keep its KV cache for the common prefix, so a later step evaluates only the new
tokens). A script, not a test: it prints figures and asserts nothing.

Usage: python benchmarks/local_model.py [--model-path FILE.gguf] [--max-steps 4]
           [--max-tokens 192] [--modes grammar,free]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from miniagent import Agent, Limits, ModelSettings, tool
from miniagent.core.models.local import LocalModel
from miniagent.core.tools.calculator import calculator
from miniagent.core.types import ModelRequest, ModelResponse, RunResult

_WEATHER = {"paris": "18 C, sunny", "tokyo": "24 C, rain", "oslo": "3 C, snow"}
_CAPITALS = {"france": "Paris", "japan": "Tokyo", "norway": "Oslo", "italy": "Rome"}


@tool
def weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: the city name, e.g. Paris
    """
    return _WEATHER.get(city.strip().lower(), f"no weather data for {city}")


@tool
def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country name, e.g. France
    """
    return _CAPITALS.get(country.strip().lower(), f"unknown country {country}")


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text
    """
    return len(text.split())


TOOLS = [calculator, weather, capital, word_count]
TASKS: list[tuple[str, str]] = [
    ("What is 17 * 23? Use the calculator.", "391"),
    ("What is the weather in Tokyo right now?", "rain"),
    ("What is the capital of Norway?", "Oslo"),
    ("How many words are in the text 'the quick brown fox jumps'?", "5"),
    ("What is the square root of 1764?", "42"),
]


@dataclass
class Recorder:
    """A Model wrapper that keeps each response's llama.cpp timings."""

    inner: LocalModel
    timings: list[dict[str, float]] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tool_mode = self.inner.tool_mode

    async def generate(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.generate(request)
        raw: Any = response.raw
        if isinstance(raw, dict) and "timings" in raw:
            self.timings.append(raw["timings"])
            self.prompt_tokens.append(response.usage.prompt_tokens)
        return response

    def supports_native_tools(self) -> bool | None:
        return False

    async def aclose(self) -> None:
        return None


@dataclass
class TaskFigures:
    result: RunResult
    success: bool
    parse_failures: int
    timings: list[dict[str, float]]
    prompt_tokens: list[int]


async def run_task(
    model: LocalModel, question: str, expected: str, *, grammar: bool, args: argparse.Namespace
) -> TaskFigures:
    recorder = Recorder(model)
    agent = Agent(model=recorder, tools=TOOLS, limits=Limits(max_steps=args.max_steps),
                  model_settings=ModelSettings(max_tokens=args.max_tokens, grammar=grammar))
    result = await agent.arun(question)
    answer = result.final_answer or ""
    return TaskFigures(
        result=result,
        success=result.status == "completed" and expected.lower() in answer.lower(),
        parse_failures=sum(1 for step in result.steps if step.error is not None),
        timings=recorder.timings,
        prompt_tokens=recorder.prompt_tokens,
    )


def print_task(question: str, figures: TaskFigures) -> None:
    result = figures.result
    answer = " ".join((result.final_answer or "-").split())[:40]
    print(
        f"  {question[:44]:<44} {result.status:<13} {'yes' if figures.success else 'no':<4}"
        f" {len(result.steps):>5} {result.usage.total_tokens:>7} {figures.parse_failures:>6}"
        f"  {answer}"
    )


def prefix_reuse(all_figures: list[TaskFigures], cold: list[tuple[float, float]]) -> str:
    """Prompt processing of first steps against later steps, and what later ones would cost cold.

    The cold rate (ms per prompt token) comes from calls that evaluated their whole prompt
    (nothing reused), collected into ``cold`` across modes; a later step without reuse
    would evaluate all its prompt tokens.
    """
    first: list[tuple[float, float, int]] = []
    later: list[tuple[float, float, int]] = []
    for figures in all_figures:
        calls = [
            (t["prompt_ms"], t["prompt_n"], total)
            for t, total in zip(figures.timings, figures.prompt_tokens, strict=True)
        ]
        first.extend(calls[:1])
        later.extend(calls[1:])
    cold.extend((ms, n) for ms, n, total in first + later if n >= 0.9 * total)
    if not later:
        return "  prefix reuse: no task took more than one step"
    lines = [
        f"  {name}: {statistics.mean(c[0] for c in group):.0f} ms prompt time (mean), "
        f"{sum(c[1] for c in group):.0f} of {sum(c[2] for c in group)} prompt tokens evaluated"
        for name, group in (("first steps", first), ("later steps", later))
    ]
    if cold:
        rate = sum(ms for ms, _ in cold) / sum(n for _, n in cold)
        estimate = statistics.mean(rate * total for _, _, total in later)
        ratio = statistics.mean(c[0] for c in later) / estimate
        lines.append(
            f"  later steps without reuse: ~{estimate:.0f} ms each at the cold rate of "
            f"{rate:.2f} ms/token -> reuse makes them {ratio:.2f}x of that"
        )
    return "\n".join(lines)


async def run_mode(
    model: LocalModel, grammar: bool, args: argparse.Namespace, cold: list[tuple[float, float]]
) -> None:
    print(f"\n== {'with' if grammar else 'without'} grammar ==")
    print(
        f"  {'task':<44} {'status':<13} {'ok':<4} {'steps':>5} {'tokens':>7} {'pfail':>6}  answer"
    )
    all_figures: list[TaskFigures] = []
    started = time.perf_counter()
    for question, expected in TASKS[: args.tasks]:
        figures = await run_task(model, question, expected, grammar=grammar, args=args)
        print_task(question, figures)
        all_figures.append(figures)
    steps = sum(len(f.result.steps) for f in all_figures)
    failures = sum(f.parse_failures for f in all_figures)
    successes = sum(f.success for f in all_figures)
    tokens = sum(f.result.usage.total_tokens for f in all_figures)
    print(
        f"  parse failures {failures}/{steps} steps ({failures / max(1, steps):.0%}); "
        f"tasks solved {successes}/{len(all_figures)}; "
        f"{steps / len(all_figures):.1f} steps, {tokens / len(all_figures):.0f} tokens per task; "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(prefix_reuse(all_figures, cold))


async def main(args: argparse.Namespace) -> None:
    model = LocalModel(args.model_path, n_threads=args.threads)
    model.load()
    print(
        f"model: {model.model_path.name}; max_steps={args.max_steps}, max_tokens={args.max_tokens}"
    )
    cold: list[tuple[float, float]] = []
    for mode in args.modes.split(","):
        await run_mode(model, mode.strip() == "grammar", args, cold)
    await model.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default=None)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--tasks", type=int, default=len(TASKS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--modes", default="grammar,free", help="comma list: grammar, free")
    asyncio.run(main(parser.parse_args()))

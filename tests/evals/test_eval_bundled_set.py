"""The bundled task set: its shape, its deterministic tools, and an oracle that scores 100%."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from miniagent.cli.eval_cmd import load_eval_tools
from miniagent.core.models.base import Capabilities
from miniagent.core.types import ModelRequest, ModelResponse, ToolCall
from miniagent.evals.builtin import FIXTURES, TASKS, TOOLS
from miniagent.evals.metrics import summarize
from miniagent.evals.runner import EvalConfig, run_eval
from miniagent.evals.tasks import EvalTask, load_tasks
from tool_calls import execute

ROOT = Path(__file__).parents[2]


def has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_forty_to_sixty_tasks_in_three_categories_a_third_chinese() -> None:
    tasks = load_tasks(TASKS)
    assert 40 <= len(tasks) <= 60
    categories = Counter(t.category for t in tasks)
    assert set(categories) == {"one_tool", "multi_step", "no_tool"}
    assert min(categories.values()) >= 12
    chinese = [t for t in tasks if has_chinese(t.input)]
    assert len(chinese) == len(tasks) // 3
    assert all("zh" in t.tags for t in chinese)
    for task in tasks:
        expects = task.expected_calls or []
        assert (task.category == "no_tool") == (not expects), task.id
        if task.category == "multi_step":
            assert len(expects) >= 2 or task.id == "multi-inventory-total", task.id


def test_the_bundled_tools_are_deterministic_and_read_only_fixtures() -> None:
    registry, checkers = load_eval_tools([str(TOOLS)])
    assert registry.names == ["calculator", "list_files", "count_file_lines", "read_file",
                              "weather", "country_facts", "convert_units"]
    assert "says_yes" in checkers

    def call(name: str, **arguments: object) -> str:
        observation = asyncio.run(execute(registry, ToolCall(id="c", name=name,
                                                            arguments=arguments)))
        assert not observation.is_error, observation.output
        return observation.output

    assert call("weather", city="北京") == "北京: 25 °C, sunny, humidity 30%"
    assert call("weather", city=" paris ") == " paris : 18 °C, sunny, humidity 55%"
    assert call("convert_units", value=100, from_unit="华氏度", to_unit="°C") == "37.7778"
    assert call("convert_units", value=10, from_unit="kilometers", to_unit="mi") == "6.2137"
    assert "capital Cairo" in call("country_facts", country="埃及")
    assert call("count_file_lines", file_path="会议记录.txt") == "3"
    assert "参会人数：12" in call("read_file", file_path="会议记录.txt")
    assert sorted(p.name for p in FIXTURES.iterdir()) == ["inventory.csv", "notes.txt",
                                                          "会议记录.txt"]
    bad = asyncio.run(execute(registry, ToolCall(id="c", name="weather",
                                                arguments={"city": "Atlantis"})))
    assert bad.is_error and "Known cities: Paris, London" in bad.output


class Oracle:
    """A native-mode model that makes each task's expected calls, then gives its answer."""

    def __init__(self, tasks: list[EvalTask]) -> None:
        self.tasks = {t.input: t for t in tasks}

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(tool_mode="native", native_tools=True)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        task = self.tasks[next(m["content"] for m in request.messages if m["role"] == "user")]
        done = sum(1 for m in request.messages if m["role"] == "tool")
        calls = task.expected_calls or []
        if done < len(calls):
            call = calls[done]
            return ModelResponse(tool_calls=[ToolCall(id=f"c{done}", name=call.name,
                                                      arguments=call.arguments or {})])
        answer = task.expected.answer
        return ModelResponse(content=str(answer[0] if isinstance(answer, list) else answer))

    async def aclose(self) -> None:
        return None


def test_an_oracle_scores_every_task_with_fully_given_calls(tmp_path: Path) -> None:
    tasks = [t for t in load_tasks(TASKS) if t.expected.check != "regex" and all(
        c.arguments is not None for c in t.expected_calls or [])]
    assert len(tasks) >= 25
    registry, checkers = load_eval_tools([str(TOOLS)])
    report = summarize(run_eval(tasks, EvalConfig(modes=["native"], max_steps=6),
                                model_for=lambda mode: Oracle(tasks), tools=registry,
                                checkers=checkers))
    wrong = [r["id"] for r in report["results"] if not r["correct"] or r["status"] !=
             "completed" or r["tool_calls_correct"] is False or r["tool_errors"]]
    assert wrong == []
    assert report["accuracy"] == 1.0 and report["tool_call_accuracy"] == 1.0


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_the_task_set_and_fixtures_are_shipped_in_the_wheel(tmp_path: Path) -> None:
    # build_py lays out exactly what a wheel packs (packages plus their package data)
    built = subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q",
                            "build_py", "--build-lib", str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    base = tmp_path / "miniagent" / "evals" / "builtin"
    shipped = {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()}
    assert {"tasks.jsonl", "tools.py", "fixtures/notes.txt", "fixtures/inventory.csv",
            "fixtures/会议记录.txt"} <= shipped
    assert (base / "tasks.jsonl").read_bytes() == TASKS.read_bytes()

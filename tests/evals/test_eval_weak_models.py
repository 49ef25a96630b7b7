"""Every metric, for scripted weak models, equals the value worked out by hand.

The scripts (react mode, max_steps=3... see each task):

- A "weather in Paris": a wrong parameter name (``town``), then the right call, then 18.
  3 steps, 2 calls of which 1 invalid, 1 tool error; correct, calls correct, self-repaired.
- B "add 2 and 3": the arguments in a fenced JSON block, ``"2"`` as a string (coerced to 2),
  then 5. 2 steps, 1 valid call; correct, calls correct.
- C "weather in London": the same call four times. Calls 1 and 2 run, the 3rd gets the loop
  detector's intervention (an error observation), the 4th ends the run (loop_detected, no call
  recorded). 4 steps, 3 calls, 1 tool error; wrong, but the calls were the expected one.
- D "capital of France" (no tool needed): an action followed by a hallucinated
  ``Observation:`` and a final answer, which the parser cuts; the action runs; then "Paris".
  2 steps, 1 valid call; correct; tool calls not judged (the task expects none).
- E "add 10 and 20": gives up: two replies in no format (parse failures: prose, then an
  Action Input with no Action; the prose again would have been its answer), then
  "Final Answer: I don't know". 3 steps, 0 calls; wrong, calls wrong, met errors, not repaired.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_weak_models import USAGE, ByQuestion, react

from miniagent.core.tools.toolbox import ToolRegistry
from miniagent.evals.faults import ToolFaults
from miniagent.evals.metrics import summarize
from miniagent.evals.runner import EvalConfig, run_eval
from miniagent.evals.tasks import parse_tasks

HERE = Path(__file__).parent

TASKS = [
    {"id": "A", "input": "What is the weather in Paris?", "category": "one_tool",
     "expected": {"answer": 18, "check": "number"},
     "expected_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
    {"id": "B", "input": "Please add 2 and 3.", "category": "one_tool",
     "expected": {"answer": "5", "check": "exact"},
     "expected_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"id": "C", "input": "What is the weather in London?", "category": "one_tool",
     "expected": {"answer": 14, "check": "number"},
     "expected_calls": [{"name": "weather", "arguments": {"city": "London"}}]},
    {"id": "D", "input": "What is the capital of France?", "category": "no_tool",
     "expected": {"answer": "paris", "check": "contains"}},
    {"id": "E", "input": "Please add 10 and 20.", "category": "multi_step",
     "expected": {"answer": 30, "check": "number"},
     "expected_calls": [{"name": "add", "arguments": {"a": 10, "b": 20}}]},
]

LONDON = react("check the weather", "weather", '{"city": "London"}')
SCRIPTS = {
    "What is the weather in Paris?": [
        react("look it up", "weather", '{"town": "Paris"}'),
        react("the parameter is city", "weather", '{"city": "Paris"}'),
        "Thought: I know it\nFinal Answer: 18",
    ],
    "Please add 2 and 3.": [
        'Thought: add them\nAction: add\nAction Input: ```json\n{"a": "2", "b": 3}\n```',
        "Thought: done\nFinal Answer: 5",
    ],
    "What is the weather in London?": [LONDON, LONDON, LONDON, LONDON],
    "What is the capital of France?": [
        react("check", "weather", '{"city": "Paris"}') + "\nObservation: sunny\n"
        "Thought: done\nFinal Answer: Lyon",
        "Thought: I know this\nFinal Answer: Paris",
    ],
    "Please add 10 and 20.": [
        "I am not able to do this.",
        'Action Input: {"a": 10, "b": 20}',  # no Action line: another parse failure
        "Thought: I give up\nFinal Answer: I don't know",
    ],
}


def tools() -> ToolRegistry:
    from eval_tools import add, weather

    return ToolRegistry([weather, add])


def run(tmp_path: Path, **config: object) -> dict:
    tasks = parse_tasks([json.dumps(t) for t in TASKS], "tasks.jsonl")
    settings = {"max_steps": 4, "out": tmp_path / "out",  # the loop guard as it was scored
                "agent_options": {"answer_after_repeat": False}, **config}
    results = run_eval(tasks, EvalConfig(**settings),  # type: ignore[arg-type]
                       model_for=lambda mode: ByQuestion(SCRIPTS, tool_mode="react"),
                       tools=tools())
    return summarize(results)


def test_each_task_scores_as_worked_out_by_hand(tmp_path: Path) -> None:
    report = run(tmp_path)
    got = {r["id"]: r for r in report["results"]}
    expect = {  # id: (correct, tool_calls_correct, status, steps, made, invalid, tool errors,
        #              parse failures, self-repaired)
        "A": (True, True, "completed", 3, 2, 1, 1, 0, True),
        "B": (True, True, "completed", 2, 1, 0, 0, 0, False),
        "C": (False, True, "loop_detected", 4, 3, 0, 1, 0, False),
        "D": (True, None, "completed", 2, 1, 0, 0, 0, False),
        "E": (False, False, "completed", 3, 0, 0, 0, 2, False),
    }
    for task_id, values in expect.items():
        r = got[task_id]
        assert (r["correct"], r["tool_calls_correct"], r["status"], r["steps"], r["calls_made"],
                r["invalid_calls"], r["tool_errors"], r["parse_failures"],
                r["self_repaired"]) == values, task_id
    assert got["B"]["calls"] == [{"name": "add", "arguments": {"a": 2, "b": 3}}]
    assert got["D"]["final_answer"] == "Paris"  # the hallucinated "Lyon" answer was cut
    assert got["E"]["final_answer"] == "I don't know"


def test_metrics_overall_and_per_category_match_the_hand_computation(tmp_path: Path) -> None:
    report = run(tmp_path)
    assert report["tasks"] == 5 and report["runs"] == 5
    assert report["accuracy"] == 0.6                       # A, B, D
    assert report["tool_call_accuracy"] == 0.75            # A, B, C of A, B, C, E
    assert report["tool_call_n"] == 4
    assert report["call_validity"] == round(6 / 7, 4)      # 7 calls, A's first invalid
    assert report["steps"] == {"mean": 2.8, "distribution": {"2": 2, "3": 2, "4": 1}}
    assert report["parse_failure_rate"] == round(2 / 14, 4)  # E's two of 14 replies
    assert report["self_repair_rate"] == round(1 / 3, 4)   # A of A, C, E
    assert report["met_error_n"] == 3
    assert report["statuses"] == {"completed": 4, "loop_detected": 1}
    assert report["tokens"]["prompt"] == USAGE["prompt"] * 2.8
    assert report["tokens"]["completion_total"] == USAGE["completion"] * 14
    assert report["tokens"]["cached_total"] == USAGE["cached"] * 14
    assert report["faults"] == {
        "injected": {"tool_failures": 0, "tool_calls_seen": 0},
        "met": {"tool_errors": 2, "parse_failures": 2, "model_errors": 0,
                "runs_with_errors": 3}}
    one = report["by_category"]["one_tool"]
    assert (one["n"], one["accuracy"], one["tool_call_accuracy"]) == (3, round(2 / 3, 4), 1.0)
    none = report["by_category"]["no_tool"]
    assert (none["n"], none["accuracy"], none["tool_call_accuracy"]) == (1, 1.0, None)
    multi = report["by_category"]["multi_step"]
    assert (multi["accuracy"], multi["tool_call_accuracy"], multi["parse_failure_rate"]) == (
        0.0, 0.0, round(2 / 3, 4))
    assert report["spread"] is None
    assert report["wall_time"]["total"] > 0


def test_repeats_give_the_spread_and_modes_sit_side_by_side(tmp_path: Path) -> None:
    tasks = parse_tasks([json.dumps(t) for t in TASKS[:2]], "tasks.jsonl")
    models = {"react": ByQuestion(SCRIPTS, tool_mode="react"),
              # a native-mode model that is right only on its first repeat of task B
              "native": ByQuestion({
                  "What is the weather in Paris?": ["18", "18"],
                  "Please add 2 and 3.": ["5", "six"]}, tool_mode="native")}
    # each run of a task in a mode continues that model's script (repeat 0, then 1)
    models["react"].scripts = {k: v * 2 for k, v in SCRIPTS.items()}
    results = run_eval(tasks, EvalConfig(modes=["react", "native"], repeat=2, max_steps=4,
                                         agent_options={"answer_after_repeat": False}),
                       model_for=models.__getitem__, tools=tools())
    report = summarize(results)
    assert report["modes"] == ["react", "native"]
    react_mode, native_mode = report["by_mode"]["react"], report["by_mode"]["native"]
    assert react_mode["accuracy"] == 1.0 and react_mode["tool_call_accuracy"] == 1.0
    assert native_mode["accuracy"] == 0.75                 # 3 of 4 runs
    assert native_mode["tool_call_accuracy"] == 0.0        # answered without the tools
    assert native_mode["spread"] == {"accuracy_by_repeat": [1.0, 0.5], "mean": 0.75,
                                     "min": 0.5, "max": 1.0, "stdev": 0.25}
    assert report["accuracy"] == round(7 / 8, 4)
    assert [r["key"] for r in report["results"]][:3] == ["react/0/A", "react/0/B", "react/1/A"]


@pytest.mark.parametrize("rate", [1.0])
def test_injected_tool_faults_are_reported_apart_from_faults_met(tmp_path: Path,
                                                                 rate: float) -> None:
    # every valid call fails: A's invalid first call is the model's own fault, met but not
    # injected; its second call is injected and met; B's one call is injected and met
    report = run(tmp_path, faults=ToolFaults(rate=rate, seed=3))
    got = {r["id"]: r for r in report["results"]}
    assert got["A"]["faults_injected"]["tool_failures"] == 1
    assert got["A"]["tool_errors"] == 2
    assert got["B"]["faults_injected"]["tool_failures"] == 1
    # C: two calls run (both fail), the third is the loop detector's; D's call fails
    assert got["C"]["faults_injected"]["tool_failures"] == 2
    assert report["faults"]["injected"] == {"tool_failures": 5, "tool_calls_seen": 5}
    assert report["faults"]["met"]["tool_errors"] == 2 + 1 + 3 + 1
    assert got["A"]["self_repaired"] is True  # the script answers 18 anyway

"""Hostile inputs to an eval never cost its reports: a bad ``--compare`` report is refused
before anything runs, a non-finite expected answer is refused when the tasks load, and every
JSON file the eval writes is strict JSON, whatever numbers a model sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import TOOLS, miniagent_eval, react_server, tasks_file

from miniagent.core.errors import UserError
from miniagent.evals.tasks import parse_tasks
from miniagent.testing.stub_server import StubServer


def strict_json(text: str) -> Any:
    """``text`` parsed as JSON proper: ``NaN``, ``Infinity`` and ``1e999`` are errors."""
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    def finite(token: str) -> float:
        value = float(token)
        if value in (float("inf"), float("-inf")):
            refuse(token)
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


RESULT = {"key": "react/0/paris", "id": "paris", "mode": "react", "repeat": 0,
          "correct": True, "status": "completed", "tool_calls_correct": True, "steps": 2,
          "final_answer": "18"}

BAD_REPORTS = {
    "a result that is a list": ({"results": [[1, 2]]}, "results.0"),
    "a key that is a list": ({"results": [{**RESULT, "key": ["k"]}]}, "results.0.key"),
    "no key and no id": ({"results": [{"mode": "react"}]}, "a 'key' or an 'id'"),
    "a metric that is text": ({"results": [], "accuracy": "high"}, "accuracy"),
    "groups in a list": ({"results": [], "by_mode": [{"accuracy": 1}]}, "by_mode"),
    "a group metric that is text": ({"results": [], "by_category": {"c": {
        "call_validity": "x"}}}, "by_category.c.call_validity"),
    "NaN": ('{"results": [], "accuracy": NaN}', "NaN is not JSON"),
    "1e999": ('{"results": [], "accuracy": 1e999}', "1e999 is too large"),
}


def test_a_compare_report_of_the_wrong_shape_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    tasks = str(tasks_file(tmp_path))
    with StubServer(react_server).run_in_thread() as stub:
        for n, (name, (report, message)) in enumerate(BAD_REPORTS.items()):
            earlier = tmp_path / f"earlier-{n}.json"
            earlier.write_text(report if isinstance(report, str) else json.dumps(report),
                               encoding="utf-8")
            out_dir = tmp_path / f"o{n}"
            out = miniagent_eval(tasks, "--tools", TOOLS, "--base-url", stub.base_url,
                                 "--out", str(out_dir), "--compare", str(earlier))
            assert out.returncode == 2, (name, out.stderr)
            assert "Traceback" not in out.stderr and message in out.stderr, (name, out.stderr)
            assert len(out.stderr.strip().splitlines()) == 1, (name, out.stderr)
            assert str(earlier) in out.stderr
            assert not out_dir.exists()  # nothing ran, nothing was written
        assert stub.requests == []


def test_a_valid_compare_report_still_compares(tmp_path: Path) -> None:
    """An older report without keys (built from mode, repeat and id) is still read."""
    old = {k: v for k, v in RESULT.items() if k != "key"}
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"results": [old], "accuracy": 1.0}), encoding="utf-8")
    with StubServer(react_server).run_in_thread() as stub:
        out = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                             stub.base_url, "--out", str(tmp_path / "o"), "--max-steps", "1",
                             "--compare", str(earlier), "--json")
    assert out.returncode == 0, out.stderr
    changes = json.loads(out.stdout)["compare"]
    assert changes["broken"] == 1 and changes["changed"][0]["key"] == "react/0/paris"
    assert changes["overall"]["accuracy"] == {"before": 1.0, "after": 0.0, "delta": -1.0}


@pytest.mark.parametrize(("answer", "shown"), [
    ("NaN", "expected.answer (nan)"), ("Infinity", "expected.answer (inf)"),
    ("-1e999", "expected.answer (-inf)"), ("[1, 1e999]", "expected.answer.1 (inf)"),
])
def test_a_non_finite_expected_answer_is_refused_naming_the_task(answer: str,
                                                                 shown: str) -> None:
    line = f'{{"id": "天气", "input": "q", "expected": {{"answer": {answer}}}}}'
    with pytest.raises(UserError) as caught:
        parse_tasks([line], "tasks.jsonl")
    assert str(caught.value).startswith(f"tasks.jsonl:1: task '天气': {shown} is not a finite")


def test_a_non_finite_expected_answer_stops_the_command_before_it_runs(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "nan", "input": "q", "expected": {"answer": NaN}}\n',
                     encoding="utf-8")
    with StubServer(react_server).run_in_thread() as stub:
        out = miniagent_eval(str(tasks), "--tools", TOOLS, "--base-url", stub.base_url,
                             "--out", str(tmp_path / "o"))
        assert stub.requests == []
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "task 'nan': expected.answer (nan) is not a finite number" in out.stderr


def test_a_models_non_finite_arguments_leave_every_json_file_strict(tmp_path: Path) -> None:
    """The model calls ``double`` with ``x`` NaN and 1e999: the run's record keeps the calls
    (as text), and results.jsonl, report.json and the --json output all stay JSON."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "d", "input": "Double it.", "category": "数",
                                 "expected": {"answer": "翻倍"}}) + "\n", encoding="utf-8")

    def server(data: dict[str, Any], n: int) -> str:
        step = len(data["messages"]) // 2  # system and question, then a reply and its result
        if step > 2:
            return "Thought: ok\nFinal Answer: 翻倍"
        value = "NaN" if step == 1 else "1e999"
        return f'Thought: t\nAction: double\nAction Input: {{"x": {value}}}'

    out_dir = tmp_path / "o"
    with StubServer(server).run_in_thread() as stub:
        out = miniagent_eval(str(tasks), "--tools", TOOLS, "--base-url", stub.base_url,
                             "--out", str(out_dir), "--json")
    assert out.returncode == 0, out.stderr
    printed = strict_json(out.stdout)
    written = strict_json((out_dir / "report.json").read_text(encoding="utf-8"))
    lines = (out_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    record = strict_json(lines[0])
    assert printed == written and written["results"] == [record]
    assert record["calls"] == [{"name": "double", "arguments": {"x": "NaN"}},
                               {"name": "double", "arguments": {"x": "Infinity"}}]
    assert record["correct"] and written["by_category"]["数"]["accuracy"] == 1.0


def test_a_number_check_against_an_integer_past_any_float_is_wrong_not_a_crash() -> None:
    from miniagent.evals.checks import check_answer
    from miniagent.evals.tasks import Expected

    correct, note = check_answer("1", Expected(answer=10**400, check="number"))
    assert not correct and note is not None and "is not a number" in note


def test_a_task_nested_past_the_recursion_limit_is_a_clear_error() -> None:
    with pytest.raises(UserError, match=r"tasks.jsonl:1: not a JSON object"):
        parse_tasks(["[" * 100_000 + "]" * 100_000], "tasks.jsonl")

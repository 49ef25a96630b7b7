"""Task files and answer checks: the exact shape, clear errors, each check's rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from miniagent.core.errors import UserError
from miniagent.evals.checks import check_answer, numbers_in
from miniagent.evals.tasks import Expected, load_tasks, parse_tasks


def write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
                              for x in lines), encoding="utf-8")
    return path


def test_the_issue_shape_loads_with_optional_keys_defaulted(tmp_path: Path) -> None:
    path = write(tmp_path,
                 {"id": "t1", "input": "北京天气？", "expected": {"answer": 25, "check": "number",
                                                             "tolerance": 0.5},
                  "expected_calls": [{"name": "weather", "arguments": {"city": "北京"}}],
                  "category": "one_tool", "tags": ["zh"], "source": "kept"},
                 "# a comment", "",
                 {"id": "t2", "input": "Say hi", "expected": {"answer": "hi"}})
    first, second = load_tasks(path)
    assert first.expected.tolerance == 0.5 and first.expected_calls is not None
    assert first.expected_calls[0].arguments == {"city": "北京"}
    assert first.model_extra == {"source": "kept"}
    assert (second.category, second.tags, second.expected.check, second.expected_calls,
            second.calls_match) == ("default", [], "exact", None, "order")


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "tasks.jsonl:2: not a JSON object"),
    (json.dumps({"id": "x", "input": "q"}), "tasks.jsonl:2: not a valid task: expected"),
    (json.dumps({"id": "x", "input": "q", "expected": {"answer": 1, "check": "fuzzy"}}),
     "check must be one of exact, number, regex, contains, one_of or python:NAME"),
    (json.dumps({"id": "ok", "input": "q", "expected": {"answer": 1}}),
     "task id 'ok' was already used on line 1"),
])
def test_bad_lines_are_named_by_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, {"id": "ok", "input": "q", "expected": {"answer": 1}}, line)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_tasks(path)


@pytest.mark.parametrize("tolerance", ["-0.5", "NaN", "Infinity", "-Infinity"])
def test_a_negative_or_non_finite_tolerance_is_refused_on_reading(tmp_path: Path,
                                                                  tolerance: str) -> None:
    line = ('{"id": "t", "input": "q", "expected": {"answer": 1, "check": "number", '
            f'"tolerance": {tolerance}}}}}')
    path = write(tmp_path, {"id": "ok", "input": "q", "expected": {"answer": 1}}, line)
    # negative: not a valid task; NaN or infinite: not a finite number (naming task 't')
    with pytest.raises(UserError, match=r"tasks.jsonl:2: (not a valid task|task 't'): .*tolerance"):
        load_tasks(path)


def test_an_empty_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no tasks found"):
        parse_tasks(["", "# nothing"], "empty.jsonl")
    with pytest.raises(UserError, match="cannot read tasks file"):
        load_tasks(tmp_path / "missing.jsonl")


def expected(answer: object, check: str = "exact", **extra: object) -> Expected:
    return Expected.model_validate({"answer": answer, "check": check, **extra})


@pytest.mark.parametrize(("answer", "spec", "right"), [
    ("Paris.", expected("paris"), True),
    ("  PARIS  ", expected("Paris"), True),
    ("Paris, France", expected("Paris"), False),
    ("北京。", expected("北京"), True),
    ("The total is 1,234.5 units", expected(1234.5, "number"), True),
    ("about 3.14", expected(3.1416, "number", tolerance=0.01), True),
    ("about 3.14", expected(3.1416, "number"), False),
    ("答案是２５", expected(25, "number"), True),  # full-width digits
    ("no number here", expected(4, "number"), False),
    ("order #A-77 shipped", expected(r"#A-\d+", "regex"), True),
    ("order shipped", expected(r"#A-\d+", "regex"), False),
    ("It is sunny in Paris", expected("SUNNY", "contains"), True),
    ("天气晴朗", expected(["sunny", "晴"], "contains"), True),
    ("yes", expected(["yes", "y"], "one_of"), True),
    ("yes please", expected(["yes", "y"], "one_of"), False),
])
def test_each_check(answer: str, spec: Expected, right: bool) -> None:
    assert check_answer(answer, spec) == (right, None)


def test_python_checks_and_their_failures() -> None:
    checkers = {"even": lambda answer, exp: int(answer) % 2 == 0,
                "broken": lambda answer, exp: 1 / 0}
    assert check_answer("4", expected(0, "python:even"), checkers) == (True, None)
    assert check_answer("5", expected(0, "python:even"), checkers) == (False, None)
    right, note = check_answer("4", expected(0, "python:broken"), checkers)
    assert not right and note == "checker 'broken' failed: ZeroDivisionError: division by zero"
    assert check_answer("4", expected(0, "python:absent"), checkers) == (
        False, "no checker function 'absent' in the tools file")


def test_no_answer_is_wrong_and_a_bad_regex_is_noted() -> None:
    assert check_answer(None, expected("x")) == (False, None)
    right, note = check_answer("x", expected("(", "regex"))
    assert not right and note is not None and note.startswith("bad regex")
    assert numbers_in("-3 and 2e3 and .5") == [-3.0, 2000.0, 0.5]


@pytest.mark.parametrize(("answer", "wanted", "right"), [
    ("A spider has eight legs.", 8, True),
    ("Eight", 8, True),
    ("twenty-one", 21, True),
    ("ninety nine", 99, True),
    ("A spider has six legs.", 8, False),
    ("eight, I think; no: 6", 8, False),  # figures, where there are any, decide
    ("someone has legs", 1, False),  # a word inside another word is no number
])
def test_a_number_check_reads_english_number_words_only_where_no_figure_is_written(
        answer: str, wanted: int, right: bool) -> None:
    assert check_answer(answer, expected(wanted, "number")) == (right, None)

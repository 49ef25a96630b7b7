"""``miniagent eval`` as a real subprocess against the stub server."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_eval_resume import env

from miniagent.core.runtime.loop import AT_LIMIT
from miniagent.testing.fault_proxy import FaultProxy
from miniagent.testing.stub_server import StubServer

HERE = Path(__file__).parent
TOOLS = str(HERE / "eval_tools.py")

TASKS = [
    {"id": "paris", "input": "Temperature in Paris?", "category": "one_tool",
     "expected": {"answer": 18, "check": "number"},
     "expected_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
    {"id": "sum", "input": "Add 2 and 3.", "category": "one_tool",
     "expected": {"answer": "5", "check": "python:ends_with_five"},
     "expected_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"id": "double", "input": "Double 21.", "category": "one_tool",
     "expected": {"answer": 42, "check": "number"},
     "expected_calls": [{"name": "double", "arguments": {"x": "21"}}]},
    {"id": "hi", "input": "Say hello in French.", "category": "no_tool",
     "expected": {"answer": "bonjour", "check": "contains"}},
]


def user_text(data: dict[str, Any]) -> str:
    return next(m["content"] for m in data["messages"] if m["role"] == "user")


def react_server(data: dict[str, Any], n: int) -> str:
    """A server model: right on three tasks, wrong on the French one; asked for its best answer
    at max_steps (the last request, with no tools), it does not know."""
    question = user_text(data)
    if data["messages"][-1]["content"] == AT_LIMIT:
        return "Thought: no steps left\nFinal Answer: I do not know"
    if len(data["messages"]) > 2:  # the system prompt, the question, then an observation
        return "Thought: I have it\nFinal Answer: " + {
            "Temperature in Paris?": "18", "Add 2 and 3.": "5", "Double 21.": "42"}[question]
    if question == "Say hello in French.":
        return "Thought: easy\nFinal Answer: hola"
    action = {"Temperature in Paris?": ("weather", '{"city": "Paris"}'),
              "Add 2 and 3.": ("add", '{"a": 2, "b": 3}'),
              "Double 21.": ("double", '{"x": 21}')}[question]
    return f"Thought: use a tool\nAction: {action[0]}\nAction Input: {action[1]}"


def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    return path


def miniagent_eval(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "miniagent", "eval", *args], env={
        **env(), "COLUMNS": "160"}, capture_output=True, text=True, timeout=timeout)


def test_json_report_has_the_issue_keys(tmp_path: Path) -> None:
    with StubServer(react_server).run_in_thread() as stub:
        out = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                             stub.base_url, "--out", str(tmp_path / "o"), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"tasks", "accuracy", "tool_call_accuracy", "by_category", "results"} <= set(report)
    assert (report["tasks"], report["accuracy"], report["tool_call_accuracy"]) == (4, 0.75, 1.0)
    assert report["by_category"]["one_tool"]["n"] == 3
    assert report["by_category"]["one_tool"]["accuracy"] == 1.0
    assert report["by_category"]["no_tool"]["tool_call_accuracy"] is None
    first = report["results"][0]
    assert {"id", "correct", "tool_calls_correct", "status", "steps", "tokens"} <= set(first)
    assert first["tokens"] == {"prompt": 20, "completion": 10, "cached": 0}  # stub: 10/5 a call
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["double"]["calls"] == [{"name": "double", "arguments": {"x": 21}}]  # "21"->21
    assert by_id["hi"]["tool_calls_correct"] is None and by_id["hi"]["final_answer"] == "hola"
    traces = tmp_path / "o" / by_id["paris"]["trace"]
    kinds = [json.loads(line)["kind"] for line in traces.read_text().splitlines()]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished" and "tool_finished" in kinds


def test_modes_side_by_side_with_model_faults_injected_apart_from_met(tmp_path: Path) -> None:
    direct = {"Temperature in Paris?": "17", "Add 2 and 3.": "5", "Double 21.": "42",
              "Say hello in French.": "hola"}

    def both(data: dict[str, Any], n: int) -> Any:
        if data.get("tools"):  # native mode: answers at once without tools, wrong on Paris
            return direct[user_text(data)]
        return react_server(data, n)

    with StubServer(both).run_in_thread() as stub:
        out = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                             stub.base_url, "--mode", "react,native", "--out",
                             str(tmp_path / "o"), "--model-failure-rate", "0.4",
                             "--model-faults", "500,429", "--seed", "2", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["modes"] == ["react", "native"] and report["runs"] == 8
    assert report["by_mode"]["react"]["accuracy"] == 0.75
    assert report["by_mode"]["native"]["accuracy"] == 0.5  # Paris wrong, French wrong
    assert report["by_mode"]["native"]["tool_call_accuracy"] == 0.0
    proxy = FaultProxy("http://127.0.0.1:9/v1", rate=0.4, seed=2, kinds=["500", "429"])
    requests = report["model_faults"]["native"]["requests"]  # counted over both modes
    drawn = [proxy.fault_for(n) for n in range(requests)]
    injected = sum(sum(f["injected"].values()) for f in report["model_faults"].values())
    assert injected == sum(d is not None for d in drawn) > 0  # the proxy injected faults ...
    assert report["faults"]["met"]["model_errors"] == 0  # ... the client's retries absorbed


def test_the_table_html_and_compare(tmp_path: Path) -> None:
    with StubServer(react_server).run_in_thread() as stub:
        first = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                               stub.base_url, "--out", str(tmp_path / "a"), "--json")
        old = tmp_path / "old.json"
        old.write_text(first.stdout, encoding="utf-8")
        again = miniagent_eval(str(tasks_file(tmp_path)), "--tools", TOOLS, "--base-url",
                               stub.base_url, "--out", str(tmp_path / "b"), "--max-steps",
                               "1", "--compare", str(old), "--html",
                               str(tmp_path / "report.html"))
    assert again.returncode == 0, again.stderr
    table = again.stdout
    assert "miniagent eval: 4 tasks, 4 runs" in table and "accuracy" in table
    assert "compared with the earlier report: 0 fixed, 3 broken" in table
    report = json.loads((tmp_path / "b" / "report.json").read_text(encoding="utf-8"))
    assert report["compare"]["overall"]["accuracy"] == {"before": 0.75, "after": 0.0,
                                                        "delta": -0.75}
    assert {c["id"] for c in report["compare"]["changed"]} == {"paris", "sum", "double"}
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "Failures (4 of 4 runs)" in html
    # every file holds a transcript: private, whatever the umask
    written = [tmp_path / "report.html", *(tmp_path / "b").rglob("*")]
    assert any(p.suffix == ".jsonl" and p.parent.name == "traces" for p in written)
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_usage_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    tasks = str(tasks_file(tmp_path))
    cases = [
        ((), "give a tasks file (TASKS.jsonl --tools FILE) or --builtin"),
        ((tasks,), "give --tools FILE"),
        ((tasks, "--tools", TOOLS, "--mode", "react,fancy"), "--mode takes a comma-separated"),
        ((tasks, "--tools", TOOLS, "--model-failure-rate", "0.2"),
         "--model-failure-rate needs --base-url"),
        ((tasks, "--tools", str(HERE / "eval_weak_models.py")), "no tools found in"),
    ]
    for args, message in cases:
        out = miniagent_eval(*args, "--out", str(tmp_path / "o"))
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr and "Traceback" not in out.stderr


def test_only_functions_the_tools_file_defines_are_checkers(tmp_path: Path) -> None:
    from miniagent.cli.eval_cmd import load_eval_tools

    victim = tmp_path / "victim"
    victim.mkdir()
    tools = tmp_path / "rm_tools.py"
    tools.write_text("from os.path import join\nfrom shutil import rmtree\n"
                     "from miniagent import tool\n\n@tool\ndef ping() -> str:\n"
                     '    """Ping."""\n    return "pong"\n\n'
                     "def says_pong(answer, expected):\n    return 'pong' in answer\n",
                     encoding="utf-8")
    _, checkers = load_eval_tools([str(tools)])
    assert set(checkers) == {"says_pong"}
    path = tmp_path / "rm.jsonl"
    path.write_text(json.dumps({"id": "rm", "input": "q", "expected": {
        "answer": str(victim), "check": "python:rmtree"}}) + "\n", encoding="utf-8")
    out = miniagent_eval(str(path), "--tools", str(tools), "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "check 'python:rmtree' names no function defined in the tools file" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and victim.is_dir()

"""A crashed eval picks up where it stopped: the process is killed mid-run, then rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import miniagent
from miniagent.testing.stub_server import StubServer

HERE = Path(__file__).parent
QUESTIONS = [f"What is {n} plus {n}?" for n in range(1, 7)]


def answer(data: dict[str, Any], n: int) -> str:
    question = next(m["content"] for m in data["messages"] if m["role"] == "user")
    number = int(question.split()[2])
    return f"Thought: easy\nFinal Answer: {2 * number}"


def eval_command(tasks: Path, base_url: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "miniagent", "eval", str(tasks), "--tools",
            str(HERE / "eval_tools.py"), "--base-url", base_url, "--mode", "react",
            "--out", str(out), "--json"]


def env() -> dict[str, str]:
    source = str(Path(miniagent.__file__).parents[1])
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_B",
                                                                          "OPENAI_"))},
            "PYTHONPATH": source}


def asked(stub: StubServer) -> Counter[str]:
    return Counter(next(m["content"] for m in r["messages"] if m["role"] == "user")
                   for r in stub.requests)


def test_a_killed_eval_resumes_without_redoing_finished_tasks(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{n}", "input": q, "expected": {
        "answer": 2 * (n + 1), "check": "number"}}) + "\n" for n, q in enumerate(QUESTIONS)))
    out = tmp_path / "out"
    results = out / "results.jsonl"
    with StubServer(answer, latency=0.4).run_in_thread() as stub:
        first = subprocess.Popen(eval_command(tasks, stub.base_url, out), env=env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                    not results.exists() or len(results.read_text().splitlines()) < 2):
                time.sleep(0.05)
            first.send_signal(signal.SIGKILL)  # a crash: no cleanup, no final report
            first.wait(30)
        finally:
            if first.poll() is None:
                first.kill()
        finished_before = [json.loads(line)["id"] for line in results.read_text().splitlines()]
        assert 2 <= len(finished_before) < len(QUESTIONS)
        second = subprocess.run(eval_command(tasks, stub.base_url, out), env=env(),
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        counts = asked(stub)
    report = json.loads(second.stdout)
    assert [r["id"] for r in report["results"]] == [f"t{n}" for n in range(6)]
    assert report["accuracy"] == 1.0
    assert f"resuming: {len(finished_before)} task runs already done" in second.stderr
    lines = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert sorted(lines) == sorted(f"react/0/t{n}" for n in range(6))  # each once
    for n, question in enumerate(QUESTIONS):
        if f"t{n}" in finished_before:
            assert counts[question] == 1  # never asked again
        else:
            assert counts[question] in (1, 2)  # the one in flight at the kill ran again


def test_a_changed_configuration_is_refused_and_fresh_starts_over(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t0", "input": QUESTIONS[0],
                                 "expected": {"answer": 2, "check": "number"}}) + "\n")
    out = tmp_path / "out"
    with StubServer(answer).run_in_thread() as stub:
        command = eval_command(tasks, stub.base_url, out)
        assert subprocess.run(command, env=env(), capture_output=True, timeout=60
                              ).returncode == 0
        changed = subprocess.run([*command, "--max-steps", "3"], env=env(),
                                 capture_output=True, text=True, timeout=60)
        assert changed.returncode == 2
        assert "holds results of another configuration (differs in: max_steps)" in \
            changed.stderr
        fresh = subprocess.run([*command, "--max-steps", "3", "--fresh"], env=env(),
                               capture_output=True, text=True, timeout=60)
        assert fresh.returncode == 0, fresh.stderr
        assert len(stub.requests) == 2

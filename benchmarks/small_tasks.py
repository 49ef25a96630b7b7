"""Ten small tasks asked as a person asks them, through ``miniagent run`` as a user runs it.

No "use the calculator" hints: the questions say what a person would say, in English and in
Chinese, against the built-in tools and a tools file of the user's own
(``benchmarks/data/small_tasks_tools.py``: weather, currency, stock prices). Each task is one
``miniagent run QUESTION --tools builtin --tools FILE --json`` process in a fresh workspace
holding two small files; a task passes when the final answer holds what the tools say (or,
for the question that needs no tool, the known fact).

    python benchmarks/small_tasks.py --model-path FILE.gguf [--mode react] [-- EXTRA RUN OPTIONS]

It prints one line per task (pass or fail, steps, seconds, the answer) and the count.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TOOLS = Path(__file__).parent / "data" / "small_tasks_tools.py"


@dataclass(frozen=True)
class Task:
    question: str
    expected: tuple[str, ...]
    """Each of these must appear in the answer (case-insensitive); an alternative is
    written ``a|b``."""


TASKS = (
    Task("What is 17 * 23?", ("391",)),
    Task("Is it raining in London right now?", ("yes|rain",)),
    Task("How many lines does notes.txt have?", ("7",)),
    Task("What is on my todo list in todo.txt?", ("milk", "dentist")),
    Task("How much is 250 euros in US dollars?", ("270",)),
    Task("What's Apple's stock price? The ticker is AAPL.", ("189.5",)),
    Task("Is it warmer in Paris or in Oslo right now?", ("paris",)),
    Task("What is the capital of Japan?", ("tokyo",)),
    Task("北京现在的天气怎么样？", ("31",)),
    Task("计算 (12 + 30) * 3 等于多少？", ("126",)),
)


def workspace(folder: Path) -> None:
    notes = "\n".join(f"note {n}" for n in range(1, 8)) + "\n"
    (folder / "notes.txt").write_text(notes, encoding="utf-8")
    (folder / "todo.txt").write_text("- buy milk\n- call the dentist\n", encoding="utf-8")


def passed(task: Task, answer: str) -> bool:
    text = answer.lower()
    return all(any(alt in text for alt in want.split("|")) for want in task.expected)


def run(task: Task, args: argparse.Namespace, extra: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        workspace(folder)
        command = [sys.executable, "-m", "miniagent", "run", task.question, "--tools",
                   "builtin", "--tools", str(TOOLS), "--workspace", str(folder), "--json",
                   "--store", str(folder / "s.db"), *args.model, *extra]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout,
                              cwd=folder, check=False)
        seconds = time.perf_counter() - started
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        result = {"status": "crash", "final_answer": done.stderr[-300:]}
    answer = str(result.get("final_answer") or "")
    return {"question": task.question, "ok": passed(task, answer), "status": result["status"],
            "steps": result.get("steps", 0), "seconds": round(seconds, 1),
            "answer": re.sub(r"\s+", " ", answer)[:120]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-path", help="a GGUF file or an installed model's name")
    parser.add_argument("--base-url", help="an OpenAI-compatible server instead")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per task")
    parser.add_argument("--only", type=int, nargs="*", help="task numbers (1-10)")
    parser.add_argument("--json-out", type=Path, help="write the results here")
    args, extra = parser.parse_known_args()
    extra = [word for word in extra if word != "--"]
    args.model = (["--model-path", args.model_path] if args.model_path else []) + (
        ["--base-url", args.base_url] if args.base_url else [])
    chosen = [TASKS[n - 1] for n in args.only] if args.only else list(TASKS)
    results = []
    for number, task in enumerate(chosen, 1):
        result = run(task, args, extra)
        results.append(result)
        mark = "pass" if result["ok"] else "FAIL"
        print(f"{number:2} {mark} {result['status']:<10} {result['steps']} steps "
              f"{result['seconds']:6.1f} s  {task.question}  ->  {result['answer']}",
              flush=True)
    ok = sum(1 for r in results if r["ok"])
    total = sum(float(r["seconds"]) for r in results)  # type: ignore[arg-type]
    print(f"{ok}/{len(results)} passed, {total / max(len(results), 1):.1f} s per task "
          f"(options: {' '.join(args.model + extra)})")
    if args.json_out:
        args.json_out.write_text(json.dumps(results, ensure_ascii=False, indent=1),
                                 encoding="utf-8")


if __name__ == "__main__":
    main()

"""Task success side by side: miniagent and four peer frameworks on the bundled eval, one
local model behind one llama.cpp server, every task graded by miniagent's own checks.

Runtimes: ``miniagent-react``, ``miniagent-native``, ``miniagent-auto`` (``miniagent eval``
in a child process) and the peers ``smolagents`` (``ToolCallingAgent``), ``langgraph``
(``langgraph.prebuilt.create_react_agent``), ``pydantic-ai`` (``Agent`` on an
OpenAI-compatible provider) and ``openai-agents`` (``Agent`` + ``Runner`` on
``OpenAIChatCompletionsModel``, tracing off). Each peer runs from its own virtual
environment, ``benchmarks/.venvs/NAME`` (made on first use: the framework from PyPI plus
miniagent, editable, whose ``evals/builtin/tools.py`` functions are the tools; never a
dependency of miniagent), through ``benchmarks/peers/run_NAME.py``. Every runtime gets the
same tools (same names, docstrings, signatures), ``--max-steps`` model calls, temperature
0, ``--max-tokens`` per call and no system prompt of ours: miniagent's own prompt (ReAct)
or none (native), smolagents its default prompt, the others none (their default).

The server (``--server``): ``xllamacpp`` (default) is llama.cpp's own server, the embedded
model's runtime, listening on 127.0.0.1 with the GGUF's chat template (``use_jinja``): tools
are rendered by the model's template and its tool calls parsed into ``tool_calls`` where
llama.cpp knows the format; a template without tools (SmolLM2) gets the tools ignored.
``llama-cpp-python`` runs ``python -m llama_cpp.server`` (``--chat-format``, e.g.
``chatml-function-calling``). ``stub`` is an oracle stub (no model): it makes each task's
expected calls and gives its expected answer, so every runtime should score 100%: a check
of this harness, not of a model. ``--base-url`` uses a server already running.

Prints, per runtime: success per category and overall, tool-call accuracy (miniagent's
definition: runs whose valid calls include the expected ones), mean steps (model calls),
mean prompt+completion tokens per task as the server reported them, seconds per task, and
how runs ended. A run that ended at the step limit is graded on the answer it returned, if
any (smolagents asks the model for one after its last step; see ``ended`` for
``max_steps``). Writes ``OUT/report.json`` (every per-task record, the summary, the
settings) and per-runtime folders with logs. A benchmark, not a test.

Usage::

    python benchmarks/task_success.py --model-path FILE.gguf [--runtimes a,b] [--tasks N |
        --task-ids ID,ID] [--threads 1] [--timeout 300] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from task_success_runs import HERE, Grader, Peer, Settings, kill_group, run_miniagent, run_peer

from miniagent.cli.eval_cmd import load_eval_tools
from miniagent.evals.builtin import TASKS, TOOLS
from miniagent.evals.metrics import summarize
from miniagent.evals.results import dumps
from miniagent.evals.tasks import EvalTask, load_tasks
from miniagent.testing.stub_server import StubServer

MINIAGENT_MODES = ("react", "native", "auto")
PEERS = {  # name: (runner, requirements, distribution whose version is reported)
    "smolagents": ("run_smolagents.py", ["smolagents[openai]"], "smolagents"),
    "langgraph": ("run_langgraph.py", ["langgraph", "langchain-openai"], "langgraph"),
    "pydantic-ai": ("run_pydantic_ai.py", ["pydantic-ai-slim[openai]"], "pydantic-ai-slim"),
    "openai-agents": ("run_openai_agents.py", ["openai-agents"], "openai-agents"),
}
RUNTIMES = [*(f"miniagent-{m}" for m in MINIAGENT_MODES), *PEERS]
CATEGORIES = (("one_tool", "one-tool"), ("multi_step", "several"), ("no_tool", "no-tool"))
READY_TIMEOUT = 600.0


def main() -> None:
    args = _parser().parse_args()
    if args.serve:
        serve_xllamacpp(args.model_path, args.port, args.threads, args.ctx)
        return
    # a SIGTERM unwinds like Ctrl-C: the server and any runner are stopped on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    runtimes = _runtimes(args.runtimes)
    tasks = _tasks(args.tasks, args.task_ids)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    registry, checkers = load_eval_tools([str(TOOLS)])
    grader = Grader(tools=registry, checkers=checkers)
    peers = {name: Peer(name=name, script=script, requirements=reqs, distribution=dist,
                        venv=Path(args.venvs).resolve() / name)
             for name, (script, reqs, dist) in PEERS.items() if name in runtimes}
    versions = _prepare_peers(peers, out)
    records: list[dict[str, Any]] = []
    with _server(args, tasks, out) as base_url:
        settings = Settings(base_url=base_url, model=args.model, max_steps=args.max_steps,
                            max_tokens=args.max_tokens, temperature=0.0, timeout=args.timeout,
                            out=out, miniagent_args=args.miniagent_args)
        for runtime in runtimes:
            started = time.monotonic()
            print(f"{runtime}: {len(tasks)} task(s)...", file=sys.stderr, flush=True)
            records.extend(_run(runtime, tasks, settings, grader, peers, versions))
            print(f"{runtime}: done in {time.monotonic() - started:.0f} s", file=sys.stderr,
                  flush=True)
    report = summarize(records)
    report["settings"] = {
        "model_path": args.model_path, "server": args.server, "base_url": args.base_url,
        "model": args.model,
        "chat_format": args.chat_format, "threads": args.threads, "ctx": args.ctx,
        "max_steps": args.max_steps, "max_tokens": args.max_tokens, "temperature": 0.0,
        "timeout": args.timeout, "tasks": [t.id for t in tasks], "runtimes": runtimes,
        "versions": versions, "miniagent_args": args.miniagent_args,
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (out / "report.json").write_text(dumps(report, indent=1), encoding="utf-8")
    print(table(report, runtimes, versions))
    print(f"\nper-task results: {out / 'report.json'}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model-path", help="GGUF file the server loads")
    parser.add_argument("--server", choices=("xllamacpp", "llama-cpp-python", "stub"),
                        default="xllamacpp")
    parser.add_argument("--chat-format", help="llama-cpp-python's --chat_format")
    parser.add_argument("--base-url", help="a running OpenAI-compatible server instead")
    parser.add_argument("--model", default="local", help="model name sent to the server")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES),
                        help=f"comma-separated subset of {','.join(RUNTIMES)}")
    parser.add_argument("--tasks", type=int, help="only the first N tasks")
    parser.add_argument("--task-ids", help="only these tasks (comma-separated ids)")
    parser.add_argument("--threads", type=int, default=1, help="server threads")
    parser.add_argument("--ctx", type=int, default=8192, help="server context size")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per task")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--miniagent-args", default="",
                        help="more options for every 'miniagent eval', e.g. "
                        "'--grammar-field grammar'")
    parser.add_argument("--venvs", default=str(HERE / ".venvs"))
    parser.add_argument("--out", default=str(HERE / ".out" / "task_success"))
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return parser


def _runtimes(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in RUNTIMES]
    if unknown or not chosen:
        sys.exit(f"unknown runtime(s) {', '.join(unknown)}; choose from {', '.join(RUNTIMES)}")
    return list(dict.fromkeys(chosen))


def _tasks(first: int | None, ids: str | None) -> list[EvalTask]:
    tasks = load_tasks(TASKS)
    if ids:
        wanted = [i.strip() for i in ids.split(",") if i.strip()]
        missing = sorted(set(wanted) - {t.id for t in tasks})
        if missing:
            sys.exit(f"no such task(s): {', '.join(missing)}")
        tasks = [t for t in tasks if t.id in wanted]
    return tasks[:first] if first else tasks


def _prepare_peers(peers: dict[str, Peer], out: Path) -> dict[str, str]:
    """Each peer's venv, made if needed; its version, or why it cannot run."""
    from importlib.metadata import version

    versions = {"miniagent": version("miniagent")}
    for name, peer in peers.items():
        try:
            if not peer.ready():
                print(f"{name}: making {peer.venv} (first use)...", file=sys.stderr, flush=True)
            peer.ensure_venv(out / f"setup-{name}.log")
            versions[name] = peer.version()
        except (OSError, RuntimeError) as exc:
            versions[name] = f"unavailable: {exc}"
    return versions


def _run(runtime: str, tasks: list[EvalTask], settings: Settings, grader: Grader,
         peers: dict[str, Peer], versions: dict[str, str]) -> list[dict[str, Any]]:
    """One runtime's records; whatever goes wrong becomes an ``error`` record per task."""
    try:
        if runtime.startswith("miniagent-"):
            return run_miniagent(runtime.removeprefix("miniagent-"), tasks, settings, grader,
                                 TOOLS)
        if versions[runtime].startswith("unavailable"):
            return [grader.failed(t, runtime, "error", versions[runtime]) for t in tasks]
        return run_peer(peers[runtime], tasks, settings, grader)
    except Exception as exc:  # one runtime's failure never stops the others
        why = f"{type(exc).__name__}: {exc}"
        return [grader.failed(t, runtime, "error", why) for t in tasks]


# -- the server -------------------------------------------------------------------------------


@contextlib.contextmanager
def _server(args: argparse.Namespace, tasks: list[EvalTask], out: Path) -> Iterator[str]:
    """The base URL of the chosen server, stopped when the block ends."""
    if args.base_url:
        yield args.base_url
        return
    if args.server == "stub":
        with StubServer(oracle(tasks)).run_in_thread() as stub:
            yield stub.base_url
        return
    if not args.model_path or not Path(args.model_path).is_file():
        sys.exit("give --model-path FILE.gguf (or --server stub, or --base-url URL)")
    port = _free_port()
    if args.server == "xllamacpp":
        command = [sys.executable, __file__, "--serve", "--model-path", args.model_path,
                   "--port", str(port), "--threads", str(args.threads), "--ctx", str(args.ctx)]
    else:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", args.model_path,
                   "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(args.ctx),
                   "--n_threads", str(args.threads), "--logits_all", "false"]
        command += ["--chat_format", args.chat_format] if args.chat_format else []
    base_url = f"http://127.0.0.1:{port}/v1"
    with (out / "server.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            _wait_ready(base_url, process, out / "server.log")
            yield base_url
        finally:
            kill_group(process)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"the server exited with {process.returncode}:\n{tail}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{base_url}/models",
                                                                  timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.5)
    raise SystemExit(f"the server was not ready after {READY_TIMEOUT:.0f} s; see {log}")


def serve_xllamacpp(model_path: str, port: int, threads: int, ctx: int) -> None:
    """llama.cpp's server (xllamacpp) on 127.0.0.1:``port`` until SIGTERM."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model_path
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = ctx
    params.n_parallel = 1  # runtimes run one task at a time; one slot keeps the prefix cache
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.use_jinja = True  # the GGUF's template: tools rendered, tool calls parsed
    params.warmup = False
    params.sampling.seed = 0
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


# -- the oracle stub --------------------------------------------------------------------------

# for expected calls without arguments: two different calls of each tool
_ANY_ARGUMENTS: dict[str, list[dict[str, Any]]] = {
    "calculator": [{"expression": "2 + 2"}, {"expression": "3 * 3"}],
    "read_file": [{"file_path": "notes.txt"}, {"file_path": "inventory.csv"}],
    "weather": [{"city": "Paris"}, {"city": "London"}],
    "country_facts": [{"country": "France"}, {"country": "Japan"}],
    "convert_units": [{"value": 1, "from_unit": "km", "to_unit": "mi"},
                      {"value": 2, "from_unit": "kg", "to_unit": "lb"}],
    "count_file_lines": [{"file_path": "notes.txt"}, {"file_path": "inventory.csv"}],
    "list_files": [{}, {"path": "."}],
}


def oracle(tasks: list[EvalTask]) -> Any:
    """A stub reply function: each task's expected calls, one per reply, then its expected
    answer (as a ReAct text, a ``final_answer`` call for smolagents, else plain text). The
    task is the one whose input the request's user messages contain; the number of
    assistant messages so far says how far it went."""

    def reply(body: dict[str, Any], _n: int) -> Any:
        messages = body.get("messages") or []
        question = " ".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        task = next((t for t in tasks if t.input in question), None)
        if task is None:
            return "I do not know this task."
        done = sum(1 for m in messages if m.get("role") == "assistant")
        calls = task.expected_calls or []
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        react = not offered
        if done < len(calls):
            name = calls[done].name
            arguments = calls[done].arguments or _ANY_ARGUMENTS[name][done % 2]
            if react:
                return (f"Thought: I call {name}.\nAction: {name}\n"
                        f"Action Input: {json.dumps(arguments, ensure_ascii=False)}")
            return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}
        wanted = task.expected.answer
        answer = str(wanted[0] if isinstance(wanted, list) else wanted)
        if task.expected.check == "python:says_yes":
            answer = "yes"
        elif task.expected.check == "regex":  # the bundled set's: a word, in (?i)\bWORD\b
            answer = re.sub(r"\(\?i\)|\\b", "", answer)
        if react:
            return f"Thought: I know it.\nFinal Answer: {answer}"
        if "final_answer" in offered:
            return {"content": None,
                    "tool_calls": [{"name": "final_answer", "arguments": {"answer": answer}}]}
        return answer

    return reply


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


# -- the table --------------------------------------------------------------------------------


def table(report: dict[str, Any], runtimes: list[str], versions: dict[str, str]) -> str:
    """Per runtime: success by category and overall, tool-call accuracy, steps, tokens,
    seconds per task, and how the runs ended."""
    head = ["runtime", *(label for _, label in CATEGORIES), "overall", "tool calls", "steps",
            "tokens/task", "s/task", "ended"]
    rows = [head]
    for runtime in runtimes:
        group = report["by_mode"].get(runtime)
        if group is None:
            continue
        cells = [_label(runtime, versions)]
        for key, _ in CATEGORIES:
            part = group["by_category"].get(key)
            cells.append(_share(part["accuracy"], part["n"]) if part else "-")
        cells.append(_share(group["accuracy"], group["n"]))
        cells.append(_share(group["tool_call_accuracy"], group["tool_call_n"]))
        cells.append(f"{group['steps']['mean']:.1f}")
        tokens = group["tokens"]
        cells.append("n/a" if tokens["prompt"] is None else
                     f"{tokens['prompt']:,.0f}+{tokens['completion']:,.0f}")
        cells.append(f"{group['wall_time']['mean']:.1f}")
        cells.append(" ".join(f"{k}:{v}" for k, v in group["statuses"].items()))
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    note = ("success: share of tasks whose final answer passed the task's check (n); tool "
            "calls: tasks with expected calls whose valid calls include them (n); steps: model "
            "calls; tokens: prompt+completion per task as the server reported them")
    return "\n".join([*lines, "", note])


def _share(value: float | None, n: int) -> str:
    return "-" if value is None else f"{value:.0%} ({n})"


def _label(runtime: str, versions: dict[str, str]) -> str:
    """The runtime with its package's version."""
    version = versions.get("miniagent" if runtime.startswith("miniagent-") else runtime, "")
    return f"{runtime} ({'unavailable' if version.startswith('unavailable') else version})"


if __name__ == "__main__":
    main()

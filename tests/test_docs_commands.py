"""The documentation's code blocks (README.md and every page of docs/): every ``miniagent``
command a bash block shows is one the CLI accepts (subcommand, options and arguments), the ones
shown with their output print that output, and every Python block is run by the test named in
``PYTHON_BLOCKS``; a block without a test fails here, so a new example cannot go unchecked
(``tests/docs_pages.py`` says how to add one)."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer import TyperException
from typer.main import get_command

from docs_pages import blocks
from miniagent.cli import app
from miniagent.testing.stub_server import StubServer

PYTHON_BLOCKS = {  # a line of the block -> the test that runs it
    "agent = Agent(model=model, output_type=Invoice)":
        "test_docs_typed_results.py::test_the_pages_example_prints_what_the_page_says",
    "agent = Agent(model=LocalModel(), tools=[add])":
        "test_readme_main_command.py::test_the_quickstart_prints_completed",
    'api_key="EMPTY")  # tool_mode "auto"':
        "test_readme.py::test_the_server_variant_builds_a_model",
    'def get_weather(city: str, unit: str = "celsius") -> str:':
        "test_readme.py::test_writing_a_tool_example_prints_what_it_says",
    'name="get_directions"': "test_readme.py::test_schema_tool_example_runs",
    "@tool(retry=RetryPolicy(": "test_readme.py::test_retry_example_runs",
    "@tool(max_concurrency=2)": "test_readme.py::test_limits_example_runs",
    "record.edited_arguments": "test_readme.py::test_edited_approval_example_runs",
    "agent.fork(": "test_readme.py::test_fork_example_runs",
    "agent.astream(": "test_readme.py::test_stream_example_runs",
    "FallbackModel(": "test_readme.py::test_fallback_example_runs",
    '@tool(requires_approval=lambda args: args["amount"] > 100)':
        "test_readme.py::test_approval_example_runs",
    "inbox = app(agent)": "ui/test_readme_ui.py::test_the_inbox_example_runs",
    'namespace="alice"': "test_readme.py::test_conversation_and_memory_example_runs",
    "clock = MCPServer.stdio(": "mcp/test_readme_mcp.py::test_mcp_example_runs",
    "Compression(at=2500": "test_readme.py::test_compression_example_runs",
    "from miniagent.temporal import TemporalAgent, agent_worker, connect":
        "temporal/test_readme_temporal.py::test_the_python_example_runs_as_written",
    "Aids(tool_selection=2)":
        "test_readme_tools.py::test_tool_selection_example_prints_what_it_says",
    "janitor.as_tool(":
        "test_readme_tools.py::test_agents_as_tools_example_relays_the_approval",
    'trace="run.jsonl"': "observe/test_readme_trace.py::test_trace_example_runs",
    "metrics = Metrics(": "observe/test_metrics.py::test_the_readme_example_runs",
    "meter_provider=provider": "observe/test_metrics_otlp.py::test_the_readme_example_runs",
    'tool_mode="hybrid", stream=True':
        "test_readme_stream.py::test_streaming_hybrid_example_runs",
    "@tool(warmup=build_index)": "test_readme_warmup.py::test_warmup_example_runs",
}
"""Paths are under tests/."""


def bash_blocks() -> list[tuple[str, str]]:
    """Each ```bash block of the pages, with ``page:line`` where it starts."""
    return [(f"{b.page}:{b.line}", b.code) for b in blocks("bash")]


def commands() -> list[tuple[str, str, list[str]]]:
    """Every ``miniagent`` command of the bash blocks: (``page:line``, text, arguments after
    ``miniagent``), continuation lines joined, comments and ``[optional]`` parts left out."""
    found = []
    for start, block in bash_blocks():
        page, first = start.rsplit(":", 1)
        for offset, line in enumerate(block.replace("\\\n", " ").splitlines()):
            for part in re.split(r"&&|\|", line):
                words = shlex.split(part, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words.pop(0)  # VAR=value before the command
                for redirect in ("<", ">", ">>"):  # the shell's, not the command's
                    while redirect in words:
                        at = words.index(redirect)
                        del words[at:at + 2]
                if words[:1] == ["miniagent"]:
                    text = shlex.join(words)
                    found.append((f"{page}:{int(first) + offset}", text,
                                  _placeholders(_required(words[1:]))))
    return found


def _required(words: list[str]) -> list[str]:
    """``words`` without the ``[optional parts]`` the docs write in brackets."""
    kept, depth = [], 0
    for word in words:
        depth += word.startswith("[")
        if not depth:
            kept.append(word)
        depth -= word.endswith("]") and depth > 0
    return kept


def _placeholders(argv: list[str]) -> list[str]:
    """The docs' ``...`` placeholders as values an option accepts."""
    return ["http://127.0.0.1:8000/v1" if a == "..." and i and argv[i - 1] == "--base-url"
            else a for i, a in enumerate(argv)]


def parses(argv: list[str]) -> str:
    """The command ``argv`` names, parsed as the CLI would (nothing runs); raises typer's
    (click's) usage error for an unknown command or option, a missing argument or a wrong
    value."""
    command: Any = get_command(app)
    name, parent = "miniagent", None
    while True:
        context = command.make_context(name, list(argv), parent=parent)
        if not hasattr(command, "resolve_command"):  # a command, not a group of them
            return str(context.command_path)
        name, command, argv = command.resolve_command(
            context, [*context._protected_args, *context.args])
        parent = context


def test_the_docs_show_many_commands() -> None:
    assert len(commands()) >= 35


@pytest.mark.parametrize(("where", "text", "argv"), commands(),
                         ids=[where for where, _, _ in commands()])
def test_every_command_the_docs_show_is_one_the_cli_accepts(where: str, text: str,
                                                            argv: list[str]) -> None:
    try:
        parses(argv)
    except TyperException as exc:
        pytest.fail(f"{where}: `{text}`: {exc}")


def test_every_python_block_is_run_by_a_test() -> None:
    shown = blocks("python")
    for block in shown:
        owners = [test for marker, test in PYTHON_BLOCKS.items() if marker in block.code]
        assert len(owners) == 1, (
            f"the Python block at {block.page}:{block.line} is run by {owners}: add its marker "
            f"and test to PYTHON_BLOCKS\n{block.code[:300]}")
    for marker in PYTHON_BLOCKS:
        assert any(marker in block.code for block in shown), f"no block holds {marker!r}"
    root = Path(__file__).parent
    for test in PYTHON_BLOCKS.values():
        path, name = test.split("::")
        assert f"def {name}(" in (root / path).read_text(encoding="utf-8"), test


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in bash, with this interpreter's ``miniagent`` first on the PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_parse_examples_print_what_the_docs_show(tmp_path: Path) -> None:
    block = next(b for _, b in bash_blocks() if "miniagent parse" in b)
    lines = block.splitlines()
    (tmp_path / "response.json").write_text(
        '{"choices": [{"message": {"content": null, "tool_calls": [{"id": "c1", "type": '
        '"function", "function": {"name": "calc", "arguments": "{\\"x\\": 1}"}}]}}], '
        '"usage": {"prompt_tokens": 20, "completion_tokens": 5, '
        '"prompt_tokens_details": {"cached_tokens": 8}}}', encoding="utf-8")
    shown = [(cmd, out[2:]) for cmd, out in itertools.pairwise(lines)
             if cmd.startswith(("printf", "miniagent")) and out.startswith("# {")]
    assert len(shown) == 2
    for command, output in shown:
        done = shell(command, tmp_path)
        assert (done.returncode, done.stdout.strip()) == (0, output), (command, done.stderr)


def test_the_first_commands_a_newcomer_types_work_against_a_server(tmp_path: Path) -> None:
    block = next(b for _, b in bash_blocks() if "miniagent demo" in b)
    with StubServer(["Thought: easy\nFinal Answer: 391"]).run_in_thread() as stub:
        for line in block.splitlines():
            command = line.split("#")[0].strip()
            if "--base-url" in command or command == "miniagent demo":
                done = shell(command.replace("http://127.0.0.1:8000/v1", stub.base_url),
                             tmp_path)
                assert done.returncode == 0, (command, done.stdout, done.stderr)
                assert "391" in done.stdout or command == "miniagent demo"


@pytest.mark.parametrize("argv", [["run", "q", "--max-step", "3"], ["sessions", "aprove", "x"],
                                  ["run", "q", "--max-steps", "many"], ["trace", "show"]])
def test_the_check_refuses_what_the_cli_refuses(argv: list[str]) -> None:
    with pytest.raises(TyperException):
        parses(argv)


def test_every_block_is_of_a_kind_a_test_checks() -> None:
    """Python blocks run, bash blocks parse, JSON blocks load (below); a text block is what a
    page's Python block prints (compared by the test that runs it); a block without a
    language is a picture (the architecture's diagram)."""
    kinds = {(b.page, b.lang) for b in blocks()
             if b.lang not in ("python", "bash", "json", "text", "")}
    assert kinds == set()


def test_every_json_block_is_an_eval_task() -> None:
    """The JSON blocks are eval task lines (docs/evaluation.md): each loads as one."""
    from miniagent.evals.tasks import parse_tasks

    shown = blocks("json")
    assert shown
    for block in shown:
        tasks = parse_tasks(block.code.splitlines(), f"{block.page}:{block.line}")
        assert len(tasks) == len(block.code.splitlines())

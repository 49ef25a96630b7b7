"""`miniagent parse` on input nested past any recursion limit, or with numbers past the digit
limit: one JSON object per answer, with ``error``, and exit 0 or 1, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

DEEP = "[" * 100_000 + "]" * 100_000


def parse(stdin: str, *flags: str) -> tuple[int, list[dict[str, Any]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIAGENT_", "OPENAI_"))}
    out = subprocess.run([sys.executable, "-m", "miniagent", "parse", *flags], input=stdin,
                         capture_output=True, text=True, env=env, timeout=60)
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr == ""
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return out.returncode, lines


def completion(message: dict[str, Any]) -> str:
    return json.dumps({"choices": [{"message": message}]})


@pytest.mark.parametrize(
    ("stdin", "error"),
    [
        (DEEP, "nested deeper than 128 levels"),
        ('{"choices": [{"message": {"content": ' + "[" * 5000 + "]" * 5000 + "}}]}",
         "nested deeper than 128 levels"),
        ('{"choices": [{"message": {"content": ' + "9" * 5000 + "}}]}",
         "a number with more than 4300 digits"),
    ],
    ids=["deep-body", "deep-content", "digits"],
)
def test_native_body_past_a_limit_is_one_error_object(stdin: str, error: str) -> None:
    code, (out,) = parse(stdin, "--native")
    assert code == 1
    assert out["error"] == f"stdin is not usable JSON: {error}"
    assert (out["content"], out["tool_calls"]) == (None, [])


@pytest.mark.parametrize(
    "arguments", ['{"a":' * 5000, "[" * 5000 + "]" * 5000, '{"n": ' + "9" * 5000 + "}"],
    ids=["deep-object", "deep-bare-value", "digits"])
def test_native_arguments_past_a_limit_are_invalid(arguments: str) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    code, (out,) = parse(completion({"content": None, "tool_calls": [call]}), "--native")
    assert code == 0
    assert out["tool_calls"] == [{"name": "f", "arguments": {"_invalid": True}}]


def test_native_content_parts_keep_only_text() -> None:
    parts = [{"type": "text", "text": "hi"}, 5, {"type": "image_url", "image_url": {"url": "u"}},
             None]
    code, (out,) = parse(completion({"content": parts}), "--native")
    assert (code, out["content"]) == (0, "hi")


def test_react_with_a_deep_bare_input_is_invalid_arguments() -> None:
    code, (out,) = parse("Action: f\nAction Input: " + "[" * 5000 + "]" * 5000)
    assert code == 0
    assert out["tool_calls"] == [{"name": "f", "arguments": {"_invalid": True}}]


def test_jsonl_deep_lines_are_error_objects_in_order() -> None:
    lines = [DEEP, json.dumps({"text": "Final Answer: ok"}),
             json.dumps({"response": {"choices": [{"message": {"content": "x"}}]}}),
             '{"response": ' + DEEP + "}"]
    code, out = parse("\n".join(lines) + "\n", "--jsonl")
    assert code == 0
    assert out[0] == {"kind": "invalid",
                      "error": "line is not usable JSON: nested deeper than 128 levels"}
    assert out[1]["final_answer"] == "ok"
    assert out[2]["content"] == "x"
    assert "nested deeper than 128 levels" in out[3]["error"]

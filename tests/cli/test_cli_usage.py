"""What ``miniagent run`` and ``sessions show`` say of tokens a server did not report, as a real
subprocess against a stub server that sends no usage (as llama.cpp's server streams)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_cli import cli

from miniagent.testing.stub_server import LLAMA_CPP, StubServer

SCRIPT = ['Thought: compute it\nAction: calculator\nAction Input: {"expression": "6*7"}',
          "Thought: done\nFinal Answer: 42"]


def run(tmp_path: Path, *flags: str, report_usage: bool = False) -> str:
    store = tmp_path / "s.db"
    stub = StubServer(SCRIPT, report_usage=report_usage, stream_style=LLAMA_CPP)
    with stub.run_in_thread():
        out = cli("run", "6 times 7?", "--tools", "builtin", "--mode", "react", "--stream",
                  "--store", str(store), "--base-url", stub.base_url, "--model", "m", *flags)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_footer_and_each_step_say_the_tokens_were_estimated(tmp_path: Path) -> None:
    shown = run(tmp_path)
    footer = re.search(r"completed · 2 steps · (.*?) · [\d.]+ s", shown)
    assert footer is not None, shown
    assert re.fullmatch(r"~[\d,]+ tokens \(estimated\)", footer.group(1))
    steps = re.findall(r"model [\d.]+ s · (.*)", shown)
    assert len(steps) == 2 and all(
        re.fullmatch(r"tokens not reported, ~[\d,]+ estimated", s.strip()) for s in steps)
    assert " 0 tokens" not in shown and "0 prompt" not in shown


def test_reported_tokens_are_counted_as_before(tmp_path: Path) -> None:
    shown = run(tmp_path, report_usage=True)
    assert "completed · 2 steps · 30 tokens · " in shown
    assert shown.count("10 prompt + 5 completion tokens") == 2


def test_json_and_the_saved_session_keep_the_usage_unknown(tmp_path: Path) -> None:
    result = json.loads(run(tmp_path, "--json"))
    usage = result["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (
        None, None, None)
    assert usage["estimated_tokens"] > 0
    assert [step["usage"]["prompt_tokens"] for step in result["trace"]] == [None, None]
    out = cli("sessions", "show", result["session_id"], "--store", str(tmp_path / "s.db"))
    assert out.returncode == 0, out.stderr
    assert f"2 steps · ~{usage['estimated_tokens']:,} tokens (estimated) · " in out.stdout

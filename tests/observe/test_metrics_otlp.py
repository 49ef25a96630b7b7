"""Metrics over OTLP/HTTP: scripted runs exported to a real receiver on 127.0.0.1, decoded with
opentelemetry-proto, equal hand-computed values and what the Prometheus backend records."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("prometheus_client")

from otlp_receiver import Receiver, otlp_receiver
from test_metrics import act, broken, delete_file, reply, slow, weather

import miniagent
from docs_pages import block_with
from miniagent import Agent, ScriptedModel
from miniagent.core.errors import ConfigError, ModelHTTPError
from miniagent.core.models.describe import describe_model
from miniagent.core.store.sqlite import SQLiteStore
from miniagent.observe.figures import DURATION_BUCKETS, FIGURES, TOKEN_BUCKETS
from miniagent.observe.metrics import Metrics, otlp_meter_provider
from miniagent.observe.metrics_prom import new_registry
from miniagent.observe.otlp_metrics import metrics_endpoint
from miniagent.testing.stub_server import StubServer

SCRIPT = [
    act("broken", city="a"),           # step 1: error
    act("broken", city="b"),           # step 2: retried, error
    act("slow", city="c"),             # step 3: timeout
    reply("I am not sure what to do"),  # step 4: neither action nor answer
    act("weather", city="d"),          # step 5: a self-repair; ok
    reply("Final Answer: sunny"),      # step 6
    act("delete_file", name="x"),      # second run: waits for a person
    reply("Final Answer: not deleted"),
    ModelHTTPError("POST http://m/v1/chat/completions answered 429: slow down", status=429),
]
"""The Prometheus test's script (tests/observe/test_metrics.py): 8 answers of 10 prompt and
4 completion tokens, one 429."""


def scripted_runs(tmp_path: Path, metrics: Metrics, flush: Any = None) -> None:
    """Four runs of :data:`SCRIPT`: completed, awaiting approval (then ``flush()``), resumed
    after a denial and completed, failed by the model."""
    model = ScriptedModel(list(SCRIPT))
    agent = Agent(model=model, tools=[weather, broken, slow, delete_file],
                  store=SQLiteStore(tmp_path / "s.db"))
    agent.subscribe(metrics)
    statuses = [agent.run("weather?").status]
    second = agent.run("delete x")
    if flush is not None:
        flush()
    agent.deny(second.session_id, reason="no")
    statuses += [second.status, agent.resume(second.session_id).status, agent.run("x").status]
    assert statuses == ["completed", "awaiting_approval", "completed", "error"]


def test_a_scripted_run_s_metrics_reach_an_otlp_receiver(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        provider = otlp_meter_provider(receiver.url, interval=3600)  # sent when flushed only
        metrics = Metrics(model=describe_model(ScriptedModel([])), meter_provider=provider)
        assert metrics.registry is None
        scripted_runs(tmp_path, metrics, flush=provider.force_flush)
        waiting = receiver.total("miniagent.approvals.waiting")
        provider.shutdown()  # the last figures

    assert waiting == 1
    assert set(receiver.paths) == {"/v1/metrics"}
    runs = "miniagent.runs"
    assert receiver.total(runs) == 4
    assert receiver.total(runs, **{"miniagent.run.status": "completed"}) == 2
    assert receiver.total(runs, **{"miniagent.run.status": "awaiting_approval"}) == 1
    assert receiver.total(runs, **{"miniagent.run.status": "error"}) == 1
    steps, = receiver.latest("miniagent.run.steps")
    assert (steps.count, steps.sum) == (4, 6 + 1 + 2 + 1)

    def calls(tool: str, outcome: str) -> float:
        return receiver.total("miniagent.tool.calls", **{"gen_ai.tool.name": tool,
                                                         "miniagent.tool.outcome": outcome})

    assert (calls("broken", "error"), calls("broken", "retried"), calls("slow", "timeout"),
            calls("weather", "ok"), calls("delete_file", "denied")) == (2, 1, 1, 1, 1)
    assert receiver.total("miniagent.tool.calls") == 6
    assert receiver.total("miniagent.tool.duration") == 4  # the calls that ran
    failures = "miniagent.tool.consecutive_failures"
    assert receiver.total(failures, **{"gen_ai.tool.name": "broken"}) == 2
    assert receiver.total(failures, **{"gen_ai.tool.name": "weather"}) == 0
    assert receiver.total("miniagent.approvals.waiting") == 0
    assert receiver.total("miniagent.approval.oldest_wait") == 0
    assert receiver.total("miniagent.parse_failures") == 1
    assert receiver.total("miniagent.self_repairs") == 1
    assert receiver.total("miniagent.guard.interventions",
                          **{"miniagent.guard": "format_error"}) == 1
    assert receiver.total("miniagent.model.errors", **{
        "error.type": "ModelHTTPError", "http.response.status_code": 429}) == 1

    chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "miniagent",
            "gen_ai.request.model": "ScriptedModel"}
    durations = receiver.latest("gen_ai.client.operation.duration", **chat)
    answered = [p for p in durations if "error.type" not in p.attributes]
    failed = [p for p in durations if p.attributes.get("error.type") == "ModelHTTPError"]
    assert sum(p.count for p in answered) == 8 and sum(p.count for p in failed) == 1
    assert answered[0].unit == "s" and answered[0].bounds == list(DURATION_BUCKETS)
    tokens = "gen_ai.client.token.usage"
    given, = receiver.latest(tokens, **chat, **{"gen_ai.token.type": "input"})
    made, = receiver.latest(tokens, **chat, **{"gen_ai.token.type": "output"})
    assert (given.count, given.sum, made.count, made.sum) == (8, 8 * 10, 8, 8 * 4)
    assert given.unit == "{token}" and given.bounds == [float(b) for b in TOKEN_BUCKETS]

    point = receiver.points[0]
    assert point.resource["service.name"] == "miniagent" and point.scope == "miniagent"
    names = {name for p in receiver.points for name in p.attributes}
    assert names == {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                     "error.type", "gen_ai.token.type", "miniagent.run.status",
                     "gen_ai.tool.name", "miniagent.tool.outcome", "miniagent.guard",
                     "http.response.status_code"}  # no ids, arguments or texts


def _prometheus_view(registry: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in registry.collect() for s in family.samples}


def _otel_view(receiver: Receiver) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The receiver's latest points under the Prometheus backend's names and labels."""
    view: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for figure in FIGURES.values():
        name = figure.prometheus + (f"_{figure.prometheus_unit}" if figure.prometheus_unit
                                    else "")
        for point in receiver.latest(figure.otel):
            labels = frozenset((label, str(point.attributes.get(attribute, "")))
                               for attribute, label in figure.attributes if label is not None)
            if figure.kind == "counter":
                view[(f"{name}_total", labels)] = point.value
            elif figure.kind == "histogram":
                view[(f"{name}_count", labels)] = point.count
                view[(f"{name}_sum", labels)] = point.sum
            else:
                view[(name, labels)] = point.value
    return view


def test_both_backends_record_the_same_figures(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        provider = otlp_meter_provider(receiver.url, interval=3600)
        metrics = Metrics(model=describe_model(ScriptedModel([])), registry=new_registry(),
                          meter_provider=provider)
        scripted_runs(tmp_path, metrics)
        provider.shutdown()

    prometheus = _prometheus_view(metrics.registry)
    otel = _otel_view(receiver)
    # every figure, under each label set the run gave it (3 run statuses, 5 tool outcomes...)
    assert len(otel) == 33
    assert {figure.otel for figure in FIGURES.values()} == {p.name for p in receiver.points}
    for key, value in otel.items():
        assert prometheus[key] == pytest.approx(value), key


@pytest.mark.parametrize(("url", "endpoint"), [
    ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"),
    ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"),
    ("https://c.example/otlp/v1/traces", "https://c.example/otlp/v1/metrics"),
    ("http://127.0.0.1:4318/v1/metrics", "http://127.0.0.1:4318/v1/metrics"),
    ("http://127.0.0.1:4318/custom?k=1", "http://127.0.0.1:4318/custom?k=1"),
])
def test_the_metrics_endpoint_follows_the_spans_url(url: str, endpoint: str) -> None:
    assert metrics_endpoint(url) == endpoint


def test_a_bad_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http"):
        otlp_meter_provider("localhost:4318")


def test_metrics_on_a_meter_provider_alone_cannot_be_served() -> None:
    from opentelemetry.sdk.metrics import MeterProvider

    metrics = Metrics(model=describe_model(ScriptedModel([])), meter_provider=MeterProvider())
    with pytest.raises(ConfigError, match="registry"):
        metrics.serve("127.0.0.1:0")


def test_a_client_without_a_model_names_the_one_that_answered_and_caps_the_names() -> None:
    from miniagent.core.runtime import events as ev
    from miniagent.core.types import ModelResponse, ParsedOutput
    from miniagent.observe.metrics import MAX_MODELS

    metrics = Metrics(model=describe_model(None))  # a Temporal agent has no model
    for n in range(MAX_MODELS + 3):
        metrics(ev.ModelResponded(session_id="s", span_id=str(n), elapsed=0.1,
                                  response=ModelResponse(raw={"model": f"m{n}"}),
                                  parsed=ParsedOutput(kind="final", final_answer="x")))
    metrics(ev.ModelFailed(session_id="s", span_id="f", elapsed=0.1, error="down",
                           error_type="ModelTimeout"))
    named = {s.labels["gen_ai_request_model"]: s.value
             for family in metrics.registry.collect() for s in family.samples
             if s.name == "gen_ai_client_operation_duration_seconds_count"}
    assert named == {**{f"m{n}": 1 for n in range(MAX_MODELS)}, "other": 3, "": 1}


def test_the_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    block = block_with("meter_provider=provider")
    with otlp_receiver() as receiver:
        exec(block.replace("http://127.0.0.1:4318", receiver.url), {})
    assert capsys.readouterr().out == "42\n"
    assert receiver.total("miniagent.runs", **{"miniagent.run.status": "completed"}) == 1


# -- the CLI --------------------------------------------------------------------------------

TOOLS = '''
from miniagent import tool

@tool
def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return "12°C，多云"
'''
CLI_SCRIPT = ['Thought: 查天气\nAction: weather\nAction Input: {"city": "北京"}',
              "Thought: done\nFinal Answer: 12°C，多云"]


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("MINIAGENT_", "OPENAI_", "OTEL_"))}
    environ.update(PYTHONPATH=str(Path(miniagent.__file__).parents[1]), COLUMNS="120", **env)
    return subprocess.run([sys.executable, "-m", "miniagent", *args], capture_output=True,
                          text=True, env=environ, cwd=cwd, timeout=120)


def run_with_otlp(tmp_path: Path, receiver: Receiver, **env: str
                  ) -> subprocess.CompletedProcess[str]:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    with StubServer(CLI_SCRIPT, usage={"prompt_tokens": 25, "completion_tokens": 7}
                    ).run_in_thread() as stub:
        return cli("run", "北京天气怎么样？", "--base-url", stub.base_url, "--model", "m",
                   "--mode", "react", "--tools", "tools.py", "--otlp", receiver.url,
                   "--json", "--store", str(tmp_path / "s.db"), cwd=tmp_path, **env)


def test_run_otlp_sends_metrics_with_the_spans(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        done = run_with_otlp(tmp_path, receiver)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert len(receiver.named("chat m")) == 2  # the spans, as before
    assert receiver.total("miniagent.runs", **{"miniagent.run.status": "completed"}) == 1
    assert receiver.total("miniagent.tool.calls", **{"gen_ai.tool.name": "weather",
                                                     "miniagent.tool.outcome": "ok"}) == 1
    chat = {"gen_ai.request.model": "m", "gen_ai.provider.name": "openai",
            "server.address": "127.0.0.1"}
    assert receiver.total("gen_ai.client.operation.duration", **chat) == 2
    given, = receiver.latest("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"})
    made, = receiver.latest("gen_ai.client.token.usage", **{"gen_ai.token.type": "output"})
    assert (given.count, given.sum, made.sum) == (2, 2 * 25, 2 * 7)
    steps, = receiver.latest("miniagent.run.steps")
    assert (steps.count, steps.sum) == (1, 2)


def test_a_collector_that_takes_spans_only_costs_one_line(tmp_path: Path) -> None:
    with otlp_receiver(metrics=False) as receiver:  # answers 404 to /v1/metrics
        done = run_with_otlp(tmp_path, receiver)
    assert done.returncode == 0, done.stderr
    assert len(receiver.named("chat m")) == 2
    line, = done.stderr.splitlines()
    assert line.startswith(f"miniagent: OpenTelemetry metrics could not be sent to the "
                           f"collector at {receiver.url}/v1/metrics (")
    assert "OTEL_METRICS_EXPORTER=none" in line


def test_otel_metrics_exporter_none_sends_spans_alone(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        done = run_with_otlp(tmp_path, receiver, OTEL_METRICS_EXPORTER="none")
    assert done.returncode == 0, done.stderr
    assert len(receiver.named("chat m")) == 2
    assert "/v1/metrics" not in receiver.paths and receiver.points == []


@pytest.mark.parametrize("command", [["run"], ["chat"], ["sessions", "resume"], ["worker"]])
def test_the_option_is_offered(command: list[str], tmp_path: Path) -> None:
    done = cli(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = re.search(r"^  --otlp URL\s+(.*?)\n  --", done.stdout, re.MULTILINE | re.DOTALL)
    assert found is not None, done.stdout
    assert "metrics" in found.group(1)


class _BrokenMeterProvider:
    """A meter provider whose instruments raise when used (a broken third-party SDK)."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:  # create_counter, create_histogram, ...
        return lambda *args, **kwargs: self

    def add(self, *args: Any) -> None:
        raise RuntimeError("the meter is broken")

    record = set = add


def test_a_meter_that_raises_never_reaches_the_call_and_spares_the_other_backend(
        caplog: pytest.LogCaptureFixture) -> None:
    from miniagent.core.types import Observation

    metrics = Metrics(model=describe_model(ScriptedModel([])), registry=new_registry(),
                      meter_provider=_BrokenMeterProvider())
    for n in range(3):  # what a Temporal worker's activity calls after each tool call
        metrics.tool_call(session_id="s", observation=Observation(
            call_id=str(n), tool_name="weather", output="sunny"))
    metrics.model_call(elapsed=0.2)
    assert metrics.registry.get_sample_value(
        "miniagent_tool_calls_total", {"tool": "weather", "outcome": "ok"}) == 3
    assert metrics.registry.get_sample_value(
        "gen_ai_client_operation_duration_seconds_count",
        {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "miniagent",
         "gen_ai_request_model": "ScriptedModel", "error_type": ""}) == 1
    said = [r.getMessage() for r in caplog.records if "the meter is broken" in r.getMessage()]
    assert len(said) == 1  # once, not per figure


@contextlib.contextmanager
def _silent_collector() -> Iterator[str]:
    """A collector that accepts connections and reads requests, and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for connection in held:
            connection.close()
        thread.join(10)


@pytest.mark.parametrize("signal", ["metrics", "spans"])
def test_shutdown_ends_when_the_collector_accepts_and_never_answers(signal: str) -> None:
    from miniagent.observe.otel import otlp_provider

    with _silent_collector() as url:
        if signal == "metrics":
            provider = otlp_meter_provider(url, interval=3600, timeout=1.0, shutdown_timeout=0.2)
            Metrics(model=describe_model(ScriptedModel([])), meter_provider=provider
                    ).model_call(elapsed=0.1)
        else:
            provider = otlp_provider(url, timeout=1.0, shutdown_timeout=0.2)
            with provider.get_tracer("test").start_as_current_span("step"):
                pass
        stopping = threading.Thread(target=provider.shutdown, daemon=True)
        stopping.start()
        stopping.join(60)  # bounded by the exporter's timeout (1 s): never 60 s
        assert not stopping.is_alive()


@pytest.mark.parametrize(("interval", "env"), [(None, "0"), (None, "-5"), (0.0, None)])
def test_an_export_interval_that_is_not_positive_is_a_config_error(
        interval: float | None, env: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if env is not None:
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", env)
    given = "OTEL_METRIC_EXPORT_INTERVAL=" if env is not None else "interval="
    with pytest.raises(ConfigError, match=f"must be above 0, got {given}"):
        otlp_meter_provider("http://127.0.0.1:4318", interval=interval)

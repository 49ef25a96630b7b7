"""The Redactor: secret values, credential-named fields and token-looking text."""

from __future__ import annotations

import json
from pathlib import Path

from miniagent.core.trace.redact import REDACTED, Redactor, env_secrets, model_secrets


def test_known_values_are_replaced_inside_any_text() -> None:
    redact = Redactor(["abcdef-1234", "abcdef-1234-longer"], from_env=False)
    assert redact.text("a abcdef-1234-longer b abcdef-1234") == f"a {REDACTED} b {REDACTED}"
    assert redact(["x abcdef-1234", 3, None]) == [f"x {REDACTED}", 3, None]


def test_short_values_are_not_secrets() -> None:
    assert Redactor(["ab", ""], from_env=False).text("ab cd") == "ab cd"


def test_credential_named_fields_lose_their_whole_value() -> None:
    redact = Redactor(from_env=False)
    value = {"headers": {"Authorization": "Bearer x", "X-Api-Key": "k", "Accept": "json"},
             "arguments": {"password": "p", "user": "bob", "access_token": "t"},
             "usage": {"prompt_tokens": 3, "cached_tokens": 1}, "api_key": None}
    assert redact(value) == {
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "json"},
        "arguments": {"password": REDACTED, "user": "bob", "access_token": REDACTED},
        "usage": {"prompt_tokens": 3, "cached_tokens": 1}, "api_key": None}


def test_token_looking_text_is_replaced_but_plain_words_stay() -> None:
    redact = Redactor(from_env=False)
    assert redact.text("Authorization: Basic dXNlcjpwYXNz") == f"Authorization: {REDACTED}"
    assert redact.text("use bearer eyJhbGciOi.J9x") == f"use bearer {REDACTED}"
    assert redact.text("key sk-ant-api03-abcdefghijkl") == f"key {REDACTED}"
    plain = "Basic information about the token budget; authorization is required"
    assert redact.text(plain) == plain


def test_credential_environment_variables() -> None:
    environ = {"OPENAI_API_KEY": "sk-env-value-1", "GITHUB_TOKEN": "ghp_value_2",
               "DB_PASSWORD": "pw-value-3", "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
               "HOME": "/root", "MONKEY": "banana-split", "SHORT_KEY": "abc"}
    assert sorted(env_secrets(environ)) == ["ghp_value_2", "pw-value-3", "sk-env-value-1"]


def test_model_secrets_reads_an_api_key_attribute() -> None:
    class WithKey:
        api_key = "sk-attr-123456"

    assert model_secrets(WithKey()) == ["sk-attr-123456"] and model_secrets(object()) == []


def test_json_line_redacts_like_a_walk_and_looks_into_wire_arguments() -> None:
    redact = Redactor(['sk-quote"and\\slash-123456', "plain-secret-99"], from_env=False)
    value = {
        "messages": [{"role": "user", "content": 'my key is sk-quote"and\\slash-123456'},
                     {"role": "assistant", "tool_calls": [{"function": {
                         "name": "login",
                         "arguments": '{"user": "bob", "password": "hunter2!"}'}}]}],
        "headers": {"Authorization": "Bearer plain-secret-99"},
        "text": "Authorization: Bearer abc.def.ghi123 and plain-secret-99",
        "北京": "多云",
    }
    line = redact.json_line(value)
    decoded = json.loads(line)
    assert "hunter2" not in line and "plain-secret" not in line and "slash-123456" not in line
    assert decoded["messages"][0]["content"] == f"my key is {REDACTED}"
    arguments = json.loads(decoded["messages"][1]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"user": "bob", "password": REDACTED}
    assert decoded["headers"] == {"Authorization": REDACTED}
    assert decoded["text"] == f"Authorization: {REDACTED} and {REDACTED}"
    assert '"北京": "多云"' in line
    assert value["headers"]["Authorization"] == "Bearer plain-secret-99"  # not changed


def test_raw_argument_texts_lose_credential_values() -> None:
    redact = Redactor(from_env=False)
    cases = {
        '{"user": "ana", "password": "hunter2"}': "hunter2",  # raw JSON text
        "{'user': 'ana', 'api_key': 'k-998877'}": "k-998877",  # a Python dict
        '{"user": "ana", "token": "tok-5566': "tok-5566",  # cut off inside the value
        json.dumps({"args": json.dumps({"client_secret": "s3-cr3t"})}): "s3-cr3t",  # nested
    }
    for text, secret in cases.items():
        assert secret not in redact.text(text), text
        assert secret not in redact.json_line({"raw_arguments": text}), text
    assert redact.text('{"keyword": "value", "token": ""}') == '{"keyword": "value", "token": ""}'


def test_a_runs_trace_and_spans_never_hold_a_raw_credential(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from miniagent import Agent, ScriptedModel, tool
    from miniagent.core.models.describe import describe_model
    from miniagent.core.trace.jsonl import JsonlTracer
    from miniagent.observe.otel import OtelTracer

    @tool
    def login(user: str, password: str) -> str:
        """Log in."""
        return f"welcome {user}"

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    reply = {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "login", "arguments": '{"user": "ana", "password": "hunter2-secret"}'}}]}
    tracer = JsonlTracer(tmp_path / "t.jsonl")
    agent = Agent(model=ScriptedModel([reply, {"content": "in"}], tool_mode="native"),
                  tools=[login])
    agent.subscribe(tracer)
    agent.subscribe(OtelTracer(model=describe_model(agent.model), tracer_provider=provider,
                               capture_content=True))
    assert agent.run("log in as ana").status == "completed"
    tracer.close()
    text = (tmp_path / "t.jsonl").read_text(encoding="utf-8")
    assert "hunter2-secret" not in text and "welcome ana" in text
    attributes = json.dumps([dict(s.attributes or {}) for s in spans.get_finished_spans()],
                            ensure_ascii=False)
    assert "hunter2-secret" not in attributes and "welcome ana" in attributes


def test_unquoted_credential_keys_lose_the_word_after_them() -> None:
    redact = Redactor(from_env=False)
    assert redact.text("the admin password: hunter2, thanks") == (
        f"the admin password: {REDACTED}, thanks")
    assert redact.text("API_KEY=abc123 make deploy") == f"API_KEY={REDACTED} make deploy"
    assert redact.text("GET http://h/x?user=a&token=t0k3n&page=2") == (
        f"GET http://h/x?user=a&token={REDACTED}&page=2")
    line = redact.json_line({"note": "first line\npassword: hunter2\nlast"})
    assert "hunter2" not in line and json.loads(line)["note"].endswith(f"{REDACTED}\nlast")
    plain = "max_tokens=512, tokens: 30, the password is asked for later"
    assert redact.text(plain) == plain

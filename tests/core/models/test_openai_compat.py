"""OpenAICompatibleModel against the stub server: request body, retries, errors, auto mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from miniagent.core.errors import (
    ConfigError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
    ToolsNotSupported,
)
from miniagent.core.models.base import Model
from miniagent.core.models.http import HttpClient
from miniagent.core.models.openai_compat import OpenAICompatibleModel
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import Fault, StubServer

Stub = Callable[..., StubServer]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calc",
            "description": "Evaluate arithmetic.",
            "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}},
        },
    }
]
MESSAGES = [{"role": "user", "content": "What is 2+2?"}]


def make_model(server: StubServer, **options: Any) -> OpenAICompatibleModel:
    options.setdefault("backoff_base", 0.01)
    options.setdefault("model", "stub-m")
    return OpenAICompatibleModel(base_url=server.base_url, **options)


async def test_request_body_and_headers(stub: Stub) -> None:
    server = stub(["4"])
    model = make_model(server, api_key="sk-test", extra_body={"top_k": 20, "seed": 1})
    request = ModelRequest(
        messages=MESSAGES,
        tools=TOOLS,
        stop=["Observation:"],
        temperature=0.2,
        max_tokens=64,
        extra_body={"seed": 7},
    )
    response = await model.generate(request)
    await model.aclose()
    assert response.content == "4"
    sent = server.requests[0]
    assert sent == {
        "model": "stub-m",
        "messages": MESSAGES,
        "temperature": 0.2,
        "max_tokens": 64,
        "stop": ["Observation:"],
        "tools": TOOLS,
        "tool_choice": "auto",  # sent with tools: some servers ignore tools without it
        "top_k": 20,
        "seed": 7,  # the request's extra_body wins over the model's
    }
    headers = server.request_headers[0]
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json"


async def test_tools_go_with_tool_choice_auto_unless_a_choice_is_set(stub: Stub) -> None:
    server = stub(["a", "b", "c"])
    model = make_model(server)
    await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS, tool_choice="required"))
    await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert [body.get("tool_choice") for body in server.requests] == ["auto", "required", None]


VLLM_NO_AUTO = {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice '
                                     "and --tool-call-parser to be set", "code": 400}}


def refuses_tool_choice(body: dict[str, Any], _n: int) -> Any:
    return Fault(status=400, body=VLLM_NO_AUTO) if "tool_choice" in body else "fine"


async def test_a_server_that_refuses_tool_choice_is_not_sent_it_again(stub: Stub) -> None:
    server = stub(refuses_tool_choice)
    model = make_model(server, max_retries=0)
    first = await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    second = await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    other = make_model(server, max_retries=0)  # the memory is the model object's
    await other.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    await model.aclose()
    await other.aclose()
    assert (first.content, second.content) == ("fine", "fine")
    assert ["tool_choice" in body for body in server.requests] == [True, False, False,
                                                                   True, False]
    assert all(body["tools"] == TOOLS for body in server.requests)


async def test_a_chosen_tool_choice_that_is_refused_stays_an_error(stub: Stub) -> None:
    server = stub(refuses_tool_choice)
    model = make_model(server, max_retries=0)
    with pytest.raises(ModelHTTPError, match="tool choice requires"):
        await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS,
                                          tool_choice="required"))
    await model.aclose()
    assert len(server.requests) == 1  # never sent without what the caller chose


async def test_optional_fields_are_left_out(stub: Stub) -> None:
    server = stub(["ok"])
    model = make_model(server)
    await model.generate(ModelRequest(messages=MESSAGES, temperature=None, max_tokens=None))
    await model.aclose()
    assert server.requests[0] == {"model": "stub-m", "messages": MESSAGES}
    assert "authorization" not in server.request_headers[0]


async def test_unicode_is_sent_as_utf8(stub: Stub) -> None:
    server = stub(["ok"])
    model = make_model(server)
    await model.generate(ModelRequest(messages=[{"role": "user", "content": "Zürich 東京"}]))
    await model.aclose()
    assert server.requests[0]["messages"][0]["content"] == "Zürich 東京"


async def test_tool_calls_and_usage(stub: Stub) -> None:
    server = stub(
        [{"tool_calls": [{"name": "calc", "arguments": {"expr": "2+2"}}]}],
        usage={"prompt_tokens": 100, "completion_tokens": 7, "cached_tokens": 64},
    )
    model = make_model(server)
    response = await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    await model.aclose()
    assert response.content is None
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("calc", {"expr": "2+2"})]
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (100, 7)
    assert response.usage.cached_tokens == 64


async def test_server_error_then_success_is_retried(stub: Stub) -> None:
    server = stub([Fault(status=500), Fault(status=502), "fine"])
    model = make_model(server)
    response = await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert response.content == "fine"
    assert len(server.requests) == 3


async def test_retry_after_is_honoured(stub: Stub) -> None:
    server = stub([Fault(status=429, headers={"Retry-After": "1"}), "after the wait"])
    model = make_model(server)
    response = await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert response.content == "after the wait"
    gap = server.request_times[1] - server.request_times[0]
    assert gap >= 0.9  # a check that the delay happened, not a speed requirement


async def test_retries_exhausted(stub: Stub) -> None:
    server = stub([Fault(status=503)] * 3)
    model = make_model(server, max_retries=2)
    with pytest.raises(ModelHTTPError) as caught:
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    message = str(caught.value)
    assert message.startswith(f"POST {server.base_url}/chat/completions failed after 3 attempts")
    assert "answered 503: stub fault 503" in message
    assert caught.value.status == 503
    assert len(server.requests) == 3


async def test_client_error_is_not_retried(stub: Stub) -> None:
    server = stub([Fault(status=400, body={"error": {"message": "bad temperature"}})])
    model = make_model(server)
    with pytest.raises(ModelHTTPError, match="answered 400: bad temperature") as caught:
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert not isinstance(caught.value, ToolsNotSupported)
    assert len(server.requests) == 1


async def test_404_from_a_root_without_v1_suggests_it(stub: Stub) -> None:
    # vLLM and Ollama serve only /v1/chat/completions: the root alone answers 404.
    server = stub([Fault(status=404, body={"detail": "Not Found"})] * 2)
    root = server.base_url.removesuffix("/v1")
    model = OpenAICompatibleModel(base_url=root + "/", model="m")
    with pytest.raises(ModelHTTPError) as caught:
        await model.generate(ModelRequest(messages=MESSAGES))
    assert str(caught.value) == (
        f"POST {root}/chat/completions answered 404: Not Found (did you mean {root}/v1?)")
    # With a version in the path, a 404 is about something else (an unknown model): no hint.
    versioned = make_model(server)
    with pytest.raises(ModelHTTPError) as caught:
        await versioned.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    await versioned.aclose()
    assert str(caught.value).endswith("answered 404: Not Found")


async def test_refused_connection(dead_port: int) -> None:
    base_url = f"http://127.0.0.1:{dead_port}/v1"
    model = OpenAICompatibleModel(base_url=base_url, max_retries=1, backoff_base=0.01)
    with pytest.raises(ModelConnectionError) as caught:
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert str(caught.value) == (
        f"POST {base_url}/chat/completions failed after 2 attempts: "
        f"connection refused by 127.0.0.1:{dead_port}"
    )


async def test_timeout(stub: Stub) -> None:
    server = stub([Fault(delay=5.0), Fault(delay=5.0)])
    model = make_model(server, timeout=0.3, max_retries=1)
    with pytest.raises(ModelTimeout, match=r"failed after 2 attempts: no answer from .* 0.3 s"):
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert len(server.requests) == 2


async def test_tools_rejected_is_classified(stub: Stub) -> None:
    server = stub(["react answer"], reject_tools=True)
    model = make_model(server, tool_mode="auto")
    assert model.capabilities.native_tools is None
    with pytest.raises(ToolsNotSupported, match="tools are not supported") as caught:
        await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    assert caught.value.status == 400
    assert len(server.requests) == 1  # not retried
    # The transport keeps no memory of it (the auto protocol does): still unknown here.
    assert model.capabilities.native_tools is None
    # Without tools (the ReAct fallback) the same server answers.
    response = await model.generate(ModelRequest(messages=MESSAGES, stop=["Observation:"]))
    await model.aclose()
    assert response.content == "react answer"


async def test_native_mode_rejection_is_an_http_error_the_run_reports(stub: Stub) -> None:
    server = stub([], reject_tools=True)
    model = make_model(server, tool_mode="native", model="native-m")
    with pytest.raises(ModelHTTPError, match="refused the tools field") as caught:
        await model.generate(ModelRequest(messages=MESSAGES, tools=TOOLS))
    await model.aclose()
    assert caught.value.status == 400
    assert model.capabilities.native_tools is True  # as configured: native never falls back


async def test_non_json_success_body(stub: Stub) -> None:
    server = stub([Fault(status=200, body="<html>proxy login</html>")])
    model = make_model(server)
    with pytest.raises(ModelResponseError, match="not JSON: <html>proxy login"):
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()


async def test_error_inside_a_success_body(stub: Stub) -> None:
    server = stub([Fault(status=200, body={"error": {"message": "model overloaded"}})])
    model = make_model(server)
    with pytest.raises(ModelResponseError, match="model overloaded"):
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()


async def test_shared_client_is_not_closed(stub: Stub) -> None:
    server = stub(["a", "b"])
    client = HttpClient()
    first = make_model(server, client=client)
    await first.generate(ModelRequest(messages=MESSAGES))
    await first.aclose()
    second = make_model(server, client=client)
    await second.generate(ModelRequest(messages=MESSAGES))
    await client.aclose()
    assert server.connections == 1


def test_implements_the_model_protocol() -> None:
    model = OpenAICompatibleModel(base_url="http://127.0.0.1:1/v1/", model="m")
    assert isinstance(model, Model)
    assert model.tool_mode == "auto"
    assert model.url == "http://127.0.0.1:1/v1/chat/completions"


@pytest.mark.parametrize(
    ("field", "expected"),
    [("grammar", {"grammar": "root ::= x"}),
     ("guided_grammar", {"guided_grammar": "root ::= x"}),
     ("structured_outputs", {"structured_outputs": {"grammar": "root ::= x"}}),
     (None, {})],
)
async def test_grammar_is_sent_only_in_the_configured_field(
    stub: Callable[..., StubServer], field: Any, expected: dict[str, Any]
) -> None:
    server = stub(["ok"])
    model = OpenAICompatibleModel(base_url=server.base_url, model="m", grammar_field=field)
    await model.generate(ModelRequest(messages=[{"role": "user", "content": "hi"}],
                                      grammar="root ::= x"))
    await model.aclose()
    sent = server.requests[0]
    assert {k: sent[k] for k in ("grammar", "guided_grammar", "structured_outputs")
            if k in sent} == expected


@pytest.mark.parametrize(
    ("base_url", "says"),
    [("127.0.0.1:8000/v1", "http:// or https://"),
     ("ftp://127.0.0.1/v1", "http:// or https://"),
     ("http:///v1", "no host"),
     ("http://127.0.0.1:99999/v1", "port"),
     ("http://127.0.0.1:http/v1", "port"),
     ("http://[::1/v1", "IPv6"),
     ("http://127.0.0.1:8000/v 1", "whitespace or control"),
     ("http://127.0.0.1:8000/v1?key=1", "query"),
     ("http://127.0.0.1:8000/v1#x", "query"),
     ("http://例え.jp/v1", "ASCII"),
     ("http://user:hunter2@127.0.0.1:8000/v1", "must not hold credentials"),
     ("http://token@127.0.0.1:8000/v1", "must not hold credentials"),
     ("", "http:// or https://")],
)
def test_a_bad_base_url_is_a_config_error(base_url: str, says: str) -> None:
    with pytest.raises(ConfigError, match="base_url") as info:
        OpenAICompatibleModel(base_url=base_url)
    assert says.lower() in str(info.value).lower()
    assert "hunter2" not in str(info.value)  # a refused URL's password is not shown either


def test_surrounding_whitespace_of_the_base_url_is_dropped() -> None:
    model = OpenAICompatibleModel(base_url="  http://[::1]:8000/v1/ \n")
    assert model.url == "http://[::1]:8000/v1/chat/completions"


@pytest.mark.parametrize(
    ("api_key", "says"),
    [("sk-abc\r\nX-Injected: 1", "line break"), ("sk-abc\rdef", "line break"),
     ("sk-\x00abc", "control character"), ("sk-ключ", "Latin-1")],
)
def test_an_api_key_that_cannot_be_a_header_is_a_config_error(api_key: str, says: str) -> None:
    with pytest.raises(ConfigError, match="api_key") as info:
        OpenAICompatibleModel(api_key=api_key)
    assert says in str(info.value)
    assert "abc" not in str(info.value) and "ключ" not in str(info.value)  # never echo a key


async def test_surrounding_whitespace_of_the_api_key_is_dropped(stub: Stub) -> None:
    server = stub(["ok"])
    model = make_model(server, api_key=" sk-test\r\n")
    await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert server.request_headers[0]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_a_timeout_must_be_a_positive_number(timeout: float) -> None:
    with pytest.raises(ConfigError, match="timeout"):
        OpenAICompatibleModel(timeout=timeout)


async def test_an_error_with_an_empty_message_shows_the_body(stub: Stub) -> None:
    # llama-cpp-python's server, asked for tool_choice "required" in chatml-function-calling,
    # fails an assertion and answers exactly this.
    body = {"error": {"message": "", "type": "internal_server_error", "param": None, "code": None}}
    server = stub([Fault(status=500, body=body)] * 2)
    model = make_model(server, max_retries=1)
    with pytest.raises(ModelHTTPError) as caught:
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert "answered 500: (empty error message) {" in str(caught.value)
    assert '"internal_server_error"' in str(caught.value)


async def test_an_empty_error_body_says_so(stub: Stub) -> None:
    server = stub([Fault(status=502, body="")])
    model = make_model(server, max_retries=0)
    with pytest.raises(ModelHTTPError, match=r"answered 502: \(empty body\)$"):
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()


async def test_a_server_error_that_names_the_request_invalid_is_not_retried(stub: Stub) -> None:
    # llama-cpp-python's server answers a request that fails its validation with a 500.
    message = ("1 validation error:\n  {'type': 'int_parsing', 'loc': ('body', 'max_tokens'), "
               "'msg': 'Input should be a valid integer'}")
    server = stub([Fault(status=500, body={"error": {"message": message,
                                                     "type": "internal_server_error"}}), "ok"])
    model = make_model(server, max_retries=3)
    with pytest.raises(ModelHTTPError, match="answered 500: 1 validation error") as caught:
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert caught.value.status == 500
    assert len(server.requests) == 1  # asking again would get the same answer
    invalid = stub([Fault(status=503, body={"error": {"message": "bad", "type":
                                                      "invalid_request_error"}}), "ok"])
    model = make_model(invalid, max_retries=3)
    with pytest.raises(ModelHTTPError, match="answered 503: bad"):
        await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert len(invalid.requests) == 1


async def test_a_rate_limit_is_retried_whatever_its_body_says(stub: Stub) -> None:
    body = {"error": {"message": "Rate limit reached", "type": "invalid_request_error"}}
    server = stub([Fault(status=429, body=body), "fine"])
    model = make_model(server, max_retries=2)
    response = await model.generate(ModelRequest(messages=MESSAGES))
    await model.aclose()
    assert response.content == "fine" and len(server.requests) == 2

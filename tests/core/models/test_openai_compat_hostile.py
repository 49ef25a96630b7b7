"""OpenAICompatibleModel against bodies nested past any recursion limit and retry delays
no server means: every failure is a ModelError with a short message, and a run ends with a
status."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from miniagent import Agent
from miniagent.core.errors import ModelHTTPError, ModelResponseError
from miniagent.core.models.http import HttpResponse
from miniagent.core.models.openai_compat import OpenAICompatibleModel, _retry_after
from miniagent.core.types import ModelRequest
from miniagent.testing.stub_server import Fault, StubServer

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
RawServer = Callable[[Handler], AbstractAsyncContextManager[str]]  # the conftest fixture
MESSAGES = [{"role": "user", "content": "hi"}]
HANG_CHECK = 30.0  # bounded waits, so a regression fails instead of hanging the suite


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))


# -- bodies nested past any recursion limit -----------------------------------------------


def answering(status: int, body: bytes) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n" % (status, len(body)))
            writer.write(body)
            await writer.drain()

    return handler


DEEP_CONTENT = b'{"choices": [{"message": {"content": ' + b"[" * 5000 + b"]" * 5000 + b"}}]}"
DEEP_ARGUMENTS = json.dumps({"choices": [{"message": {"content": None, "tool_calls": [
    {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}}]}
).replace('{"a": 1}', '{"a": ' * 900 + "1" + "}" * 900).encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 128 levels"),
        (DEEP_CONTENT, "nested deeper than 128 levels"),
        (DEEP_ARGUMENTS, "nested deeper than 128 levels"),
        (b'{"choices": [{"message": {"content": ' + b"9" * 5000 + b"}}]}",
         "a number with more than 4300 digits"),
        (b"\xff\xfe\x00garbage", "not JSON"),
    ],
    ids=["deep-body", "deep-content", "deep-arguments", "digits", "garbage"],
)
async def test_undecodable_bodies_are_response_errors(
        raw_server: RawServer, body: bytes, message: str) -> None:
    async with raw_server(answering(200, body)) as base:
        model = OpenAICompatibleModel(base_url=base)
        with pytest.raises(ModelResponseError, match=message) as caught:
            await model.generate(ModelRequest(messages=MESSAGES))
        await model.aclose()
    assert len(str(caught.value)) < 500


async def test_a_deep_error_body_is_an_http_error(raw_server: RawServer) -> None:
    async with raw_server(answering(400, b'{"error": ' + b"[" * 5000 + b"]" * 5000 + b"}")) as base:
        model = OpenAICompatibleModel(base_url=base)
        with pytest.raises(ModelHTTPError, match="answered 400") as caught:
            await model.generate(ModelRequest(messages=MESSAGES))
        await model.aclose()
    assert len(str(caught.value)) < 500


async def test_a_deep_error_message_is_shown_briefly(raw_server: RawServer) -> None:
    deep = {"error": {"message": [[[["x" * 1000]]]]}}
    async with raw_server(answering(400, json.dumps(deep).encode())) as base:
        model = OpenAICompatibleModel(base_url=base)
        with pytest.raises(ModelHTTPError) as caught:
            await model.generate(ModelRequest(messages=MESSAGES))
        await model.aclose()
    assert str(caught.value).endswith("...") and len(str(caught.value)) < 500


def test_a_run_against_a_deep_body_ends_with_status_error(raw_server: RawServer) -> None:
    async def run() -> Any:
        async with raw_server(answering(200, DEEP_CONTENT)) as base:
            model = OpenAICompatibleModel(base_url=base, tool_mode="react")
            try:
                return await Agent(model=model).arun("hi")
            finally:
                await model.aclose()

    result = asyncio.run(run())
    assert result.status == "error"
    assert "nested deeper than 128 levels" in str(result.reason)


def test_http_response_json_raises_only_value_error() -> None:
    with pytest.raises(ValueError, match="nests too deeply"):
        HttpResponse(status=200, body=b"[" * 100_000).json()


# -- Retry-After --------------------------------------------------------------------------


def retry_after(value: str) -> float | None:
    return _retry_after(HttpResponse(status=429, headers={"retry-after": value}))


@pytest.mark.parametrize(
    "value",
    ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "-0.5", "61", "1e9", "1e2", "9" * 5000,
     "5_0", "٣", "0x10", "garbage", "", " ", "1.", ".5", "Wed, 21 Oct 2015 07:28:00 GMT"],
)
def test_retry_after_that_is_not_a_bounded_number_of_seconds_is_ignored(value: str) -> None:
    assert retry_after(value) is None


@pytest.mark.parametrize(("value", "seconds"), [("0", 0.0), ("1", 1.0), (" 2.5 ", 2.5),
                                                ("60", 60.0), ("007", 7.0)])
def test_retry_after_in_seconds_is_taken(value: str, seconds: float) -> None:
    assert retry_after(value) == seconds


def test_retry_after_as_an_http_date_within_a_minute_is_taken() -> None:
    from datetime import datetime, timedelta, timezone
    from email.utils import format_datetime

    def at(seconds: float) -> str:
        return format_datetime(datetime.now(timezone.utc) + timedelta(seconds=seconds),
                               usegmt=True)

    soon = retry_after(at(30))
    assert soon is not None and 0.0 < soon <= 30.0
    # past, beyond the bound, or not the IMF-fixdate form RFC 9110 has servers send
    for ignored in (at(-30), at(3600), at(30).replace("GMT", "+0000"),
                    "Mon, 30 Feb 2026 10:00:00 GMT",
                    at(30).replace(", ", " ") + " x" * 10_000):
        assert retry_after(ignored) is None


@pytest.mark.parametrize("value", ["nan", "inf", "1e9"])
async def test_retry_after_nan_falls_back_to_the_backoff(
        stub: Callable[..., StubServer], value: str) -> None:
    server = stub([Fault(status=429, headers={"Retry-After": value}), "after the backoff"])
    model = OpenAICompatibleModel(base_url=server.base_url, backoff_base=0.01)
    response = await asyncio.wait_for(model.generate(ModelRequest(messages=MESSAGES)),
                                      HANG_CHECK)
    await model.aclose()
    assert response.content == "after the backoff"

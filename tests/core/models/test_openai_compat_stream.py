"""OpenAICompatibleModel(stream=True) against hand-written servers: a stream that stalls, and a
server that answers plain JSON to a stream request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from miniagent import Agent, OpenAICompatibleModel


async def test_a_stream_that_stalls_is_timed_out_then_asked_without_streaming(
        raw_server: Any) -> None:
    served: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        body = json.loads(await reader.readexactly(length))
        served.append(b"stream" if body.get("stream") else b"plain")
        if body.get("stream"):
            event = json.dumps({"choices": [{"delta": {"content": "Thou"}}]})
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Connection: close\r\n\r\ndata: " + event.encode() + b"\n\n")
            await writer.drain()
            await asyncio.sleep(30)  # stalls; the client gives up and closes
            return
        answer = json.dumps({"choices": [{"message": {"content": "Final Answer: ok"},
                                          "finish_reason": "stop"}]}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(answer)).encode() + b"\r\n\r\n" + answer)
        await writer.drain()

    async with raw_server(handler) as base_url:
        model = OpenAICompatibleModel(base_url=base_url, stream=True, timeout=0.5,
                                      max_retries=0, tool_mode="react")
        result = await Agent(model=model).arun("q")
        await model.aclose()
    assert (result.status, result.final_answer) == ("completed", "ok")
    assert served == [b"stream", b"plain"]


async def test_a_server_answering_json_to_a_stream_request_is_read_all_the_same(
        raw_server: Any) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        await reader.readexactly(length)
        answer = json.dumps({"choices": [{"message": {"content": "Final Answer: plain"},
                                          "finish_reason": "stop"}]}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(answer)).encode() + b"\r\nConnection: close\r\n\r\n" + answer)
        await writer.drain()

    async with raw_server(handler) as base_url:
        model = OpenAICompatibleModel(base_url=base_url, stream=True, max_retries=0,
                                      tool_mode="react")
        result = await Agent(model=model).arun("q")
        await model.aclose()
    assert (result.status, result.final_answer) == ("completed", "plain")


async def test_nothing_after_done_is_read(raw_server: Any) -> None:
    """A server that sends [DONE], then more events, then keeps the body open: the answer is
    what came before [DONE], and the call does not wait for the body to end."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        for text in ("Final Answer: ", "forty-two"):
            event = json.dumps({"choices": [{"delta": {"content": text}}]})
            writer.write(b"data: " + event.encode() + b"\n\n")
        after = json.dumps({"choices": [{"delta": {"content": " and then junk"}}]}).encode()
        writer.write(b"data: [DONE]\n\n" + (b"data: " + after + b"\n\n") * 2000)
        await writer.drain()
        await asyncio.sleep(30)  # the body never ends

    async with raw_server(handler) as base_url:
        model = OpenAICompatibleModel(base_url=base_url, stream=True, timeout=5.0,
                                      max_retries=0, tool_mode="react")
        result = await Agent(model=model).arun("q")
        await model.aclose()
    assert (result.status, result.final_answer) == ("completed", "forty-two")

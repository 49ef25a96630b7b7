"""A small OpenAI-compatible HTTP server that answers from a script, for tests and benchmarks.

It speaks enough HTTP/1.1 (keep-alive, ``Content-Length`` or chunked answers) to stand in
for vLLM, llama.cpp or any ``/v1/chat/completions`` endpoint, on 127.0.0.1 only:

>>> with StubServer(["Paris"]).run_in_thread() as stub:     # doctest: +SKIP
...     model = OpenAICompatibleModel(base_url=stub.base_url, model="m")
...     ...                                                  # the model answers "Paris"
...     stub.requests[0]["messages"]                         # what the client sent

Each entry of ``responses`` is one answer, used in order:

- ``"text"``: a completion whose content is that text;
- ``{"tool_calls": [{"name": "calc", "arguments": {"x": 1}}], "content": None}``: an
  assistant message with those calls (ids, ``type`` and JSON encoding of dict arguments
  are filled in); ``finish_reason`` and ``usage`` keys are honoured too (``"usage": None``:
  the answer reports none);
- a full response body (a dict with ``"choices"``), sent as is;
- a :class:`Fault`: an error status, a hang, or a dropped connection.

``POST /v1/embeddings`` answers every request (it uses no scripted answer) with
:func:`~miniagent.testing.embeddings.trigram_embedding` of each input, ``dimensions`` long
(64 unless the request asks otherwise): deterministic vectors whose cosine follows shared
character trigrams, so that a test of semantic search means something.

A request with ``"stream": true`` is answered with server-sent events, in the way
``stream_style`` says (a :class:`StreamStyle`; presets :data:`VLLM`, :data:`LLAMA_CPP`,
:data:`OLLAMA`, :data:`REPEATED_NAME`, :data:`SHARED_INDEX`), from the same scripted answers.

``responses`` may also be a callable ``(request_json, n) -> answer`` (``n`` counts from 0),
for servers that always answer the same. When a list runs out the stub answers 500 and
says so in the body and in :attr:`StubServer.notes`.

Run ``python -m miniagent.testing.stub_server --latency 0.1`` for a standalone server
(it prints its base URL on the first line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from miniagent.testing.embeddings import DEFAULT_DIMENSIONS, trigram_embedding
from miniagent.testing.loopback import LoopbackServer, Request, read_request

__all__ = [
    "LLAMA_CPP", "OLLAMA", "REPEATED_NAME", "SHARED_INDEX", "VLLM", "Fault", "Reply",
    "StreamStyle", "StubServer",
]


@dataclass(kw_only=True)
class Fault:
    """A scripted failure.

    Attributes:
        status: The status to answer with (after ``delay``), unless ``close``.
        body: The body: a dict (sent as JSON), a str, or None for a generic error JSON.
        headers: Extra response headers, e.g. ``{"Retry-After": "1"}``.
        delay: Seconds to wait before answering (longer than the client's timeout: a hang).
        close: Drop the connection without answering (after ``delay``).
    """

    status: int = 500
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    close: bool = False


@dataclass(kw_only=True, frozen=True)
class StreamStyle:
    """How the stub streams an answer (each field is one quirk a real server has).

    Attributes:
        text_piece: Characters of content per chunk (1: character by character).
        calls_in_one_chunk: Send every tool call whole in one chunk (Ollama), instead of a
            head chunk (id, name) and argument fragments per call (vLLM, llama.cpp).
        argument_piece: Characters of arguments per fragment.
        arguments_with_head: The head chunk of a call carries the first argument fragment
            (else its arguments are ``""``).
        name_every_chunk: Repeat the call's name (and id) in every fragment.
        no_index: Leave ``index`` out of tool-call deltas (older Ollama).
        shared_index: Give every call ``index`` 0 (calls told apart by their ids only).
        null_content: Send ``"content": null`` in chunks that carry no text.
        role_chunk: Start with a chunk holding only ``role: assistant``.
        usage: Report usage when asked (``stream_options.include_usage``): ``"separate"``
            (a last chunk with no choices, as OpenAI and vLLM), ``"final"`` (inside the
            chunk with ``finish_reason``), or ``"never"``.
        reject_stream_options: Answer 400 to a request carrying ``stream_options``.
        break_after: Drop the connection after this many events (no ``[DONE]``).
        drop_calls: Say ``finish_reason: tool_calls`` but send none of the calls.
        finish_reason: Override the last chunk's ``finish_reason`` (Ollama once said
            ``stop`` for tool calls).
        done: End with ``data: [DONE]``.
    """

    text_piece: int = 3
    calls_in_one_chunk: bool = False
    argument_piece: int = 4
    arguments_with_head: bool = False
    name_every_chunk: bool = False
    no_index: bool = False
    shared_index: bool = False
    null_content: bool = False
    role_chunk: bool = True
    usage: str = "separate"
    reject_stream_options: bool = False
    break_after: int | None = None
    drop_calls: bool = False
    finish_reason: str | None = None
    done: bool = True


VLLM = StreamStyle()
"""vLLM / OpenAI: role chunk, text in pieces, per call a head then argument fragments, a
separate usage chunk when asked, ``[DONE]``."""
LLAMA_CPP = StreamStyle(text_piece=1, null_content=True, arguments_with_head=True,
                        usage="final")
"""llama.cpp's server: token by token, ``content: null`` beside tool-call deltas, arguments
starting in the head chunk, usage in the chunk that finishes."""
OLLAMA = StreamStyle(calls_in_one_chunk=True, no_index=True, role_chunk=False,
                     finish_reason="stop")
"""Ollama: all calls whole in one chunk without ``index``, ``finish_reason: stop``."""
REPEATED_NAME = StreamStyle(name_every_chunk=True, argument_piece=2)
"""A proxy that repeats each call's id and name in every fragment."""
SHARED_INDEX = StreamStyle(shared_index=True)
"""A server giving every call ``index`` 0: calls told apart by a new ``id``."""


Reply = str | dict[str, Any] | Fault
ReplySource = Sequence[Reply] | Callable[[dict[str, Any], int], Reply]


class StubServer(LoopbackServer):
    """An OpenAI-compatible ``/v1/chat/completions`` server answering from a script.

    Args:
        responses: The answers, in order, or a callable ``(request_json, n) -> answer``.
        latency: Seconds added before each chat completion answer.
        usage: Token numbers reported in each answer: ``prompt_tokens``,
            ``completion_tokens``, ``cached_tokens`` (as ``prompt_tokens_details``).
            Unless ``prompt_tokens`` is given, a request's ``tools`` add a token per 3
            characters of their JSON to the default 10, as on a server that shows them.
        report_usage: False: no answer carries ``usage``, streamed or not (llama.cpp's server
            streams so); a scripted answer's ``"usage": None`` leaves out its own.
        reject_tools: Answer 400 "tools are not supported" to requests with ``tools``.
        shows_tools: False: take ``tools`` and never count them in ``prompt_tokens``, as a
            server that does not show them to the model (llama-cpp-python's default chat
            format).
        chunked: Send bodies with ``Transfer-Encoding: chunked`` (in three chunks).
        keep_alive: Keep connections open between requests (else ``Connection: close``).
        idle_timeout: Close a connection idle this long, without telling the client.
        stream_style: How requests with ``"stream": true`` are streamed.
        model: The model id listed by ``GET /v1/models``.
        host: The address to listen on (keep it on loopback).
        port: The port; 0 picks a free one.

    Attributes:
        requests: Every chat completion request body received (parsed JSON), in order.
        embedding_requests: Every ``/embeddings`` request body received, in order.
        request_headers: Their headers (lower-case names).
        request_times: Their arrival times (:func:`time.monotonic`).
        connections: How many connections were accepted.
        notes: Things that went wrong on the server side (responses ran out, bad JSON).
    """

    _thread_name = "miniagent-stub-server"

    def __init__(
        self,
        responses: ReplySource = (),
        *,
        latency: float = 0.0,
        usage: Mapping[str, int] | None = None,
        report_usage: bool = True,
        reject_tools: bool = False,
        shows_tools: bool = True,
        chunked: bool = False,
        keep_alive: bool = True,
        idle_timeout: float | None = None,
        stream_style: StreamStyle = VLLM,
        model: str = "stub-model",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.responses: list[Reply] | Callable[[dict[str, Any], int], Reply] = (
            responses if callable(responses) else list(responses)
        )
        self.latency = latency
        self.usage = {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0}
        self.usage.update(usage or {})
        self.report_usage = report_usage
        self.counts_tools = shows_tools and "prompt_tokens" not in (usage or {})
        self.reject_tools = reject_tools
        self.chunked = chunked
        self.keep_alive = keep_alive
        self.idle_timeout = idle_timeout
        self.stream_style = stream_style
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.request_times: list[float] = []
        self.connections = 0
        self.notes: list[str] = []
        self._served = 0
        super().__init__(host=host, port=port)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value to give a client as its base URL."""
        return f"http://{self.host}:{self.port}/v1"

    # -- connection handling -------------------------------------------------------------

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        first = True
        while True:
            wait = None if first else self.idle_timeout
            try:
                request = await asyncio.wait_for(read_request(reader), wait)
            except asyncio.TimeoutError:
                break  # idle too long: close silently, like a real server would
            if request is None or not await self._answer(request, writer):
                break
            first = False

    async def _answer(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; return whether the connection stays open."""
        keep = self.keep_alive and request.headers.get("connection", "").lower() != "close"
        path = request.path.split("?", 1)[0].rstrip("/")
        if request.method == "POST" and path.endswith("/chat/completions"):
            return await self._completion(request, writer, keep)
        if request.method == "POST" and path.endswith("/embeddings"):
            status, answer = self._embeddings(request)
            await self._write(writer, status, answer, keep)
        elif request.method == "GET" and path.endswith("/models"):
            models = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            await self._write(writer, 200, models, keep)
        else:
            error = {"error": {"message": f"no route {request.method} {request.path}"}}
            await self._write(writer, 404, error, keep)
        return keep

    def _embeddings(self, request: Request) -> tuple[int, dict[str, Any]]:
        """The status and body of an ``/embeddings`` answer."""
        try:
            data = json.loads(request.body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return 400, {"error": {"message": "body is not a JSON object"}}
        self.embedding_requests.append(data)
        texts = data.get("input")
        if isinstance(texts, str):
            texts = [texts]
        size = data.get("dimensions", DEFAULT_DIMENSIONS)
        if not (isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts)):
            return 400, {"error": {"message": "input must be a string or a list of strings"}}
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 4096:
            return 400, {"error": {"message": "dimensions must be an integer from 1 to 4096"}}
        used = sum(len(t.split()) for t in texts)
        return 200, {
            "object": "list", "model": data.get("model", self.model),
            "data": [{"object": "embedding", "index": i, "embedding": trigram_embedding(t, size)}
                     for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": used, "total_tokens": used},
        }

    async def _completion(
        self, request: Request, writer: asyncio.StreamWriter, keep: bool
    ) -> bool:
        try:
            data = json.loads(request.body)
        except ValueError:
            self.notes.append("a request body was not JSON")
            await self._write(writer, 400, {"error": {"message": "body is not JSON"}}, keep)
            return keep
        self.requests.append(data)
        self.request_headers.append(request.headers)
        self.request_times.append(time.monotonic())
        if self.reject_tools and data.get("tools"):
            message = "tools are not supported by this server"
            await self._write(writer, 400, {"error": {"message": message}}, keep)
            return keep
        if self.stream_style.reject_stream_options and "stream_options" in data:
            error = {"error": {"message": "Unrecognized request argument: stream_options"}}
            await self._write(writer, 400, error, keep)
            return keep
        reply = self._next_reply(data)
        if self.latency:
            await asyncio.sleep(self.latency)
        if isinstance(reply, Fault):
            return await self._fault(reply, writer, keep)
        body = self._completion_body(reply, data)
        if data.get("stream") is True:
            return await self._stream(writer, body, data, keep)
        await self._write(writer, 200, body, keep)
        return keep

    async def _stream(self, writer: asyncio.StreamWriter, body: dict[str, Any],
                      data: dict[str, Any], keep: bool) -> bool:
        """Send ``body`` as a stream of server-sent events in :attr:`stream_style`."""
        style = self.stream_style
        options = data.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True
        events = stream_events(body, style, with_usage=with_usage)
        head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache",
                f"Connection: {'keep-alive' if keep else 'close'}", "Transfer-Encoding: chunked"]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for sent, event in enumerate(events):
            if style.break_after is not None and sent >= style.break_after:
                await writer.drain()
                return False  # the connection drops mid-stream
            payload = f"data: {event}\n\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep

    def _next_reply(self, data: dict[str, Any]) -> Reply:
        n = self._served
        self._served += 1
        if callable(self.responses):
            return self.responses(data, n)
        if n < len(self.responses):
            return self.responses[n]
        note = (
            f"stub server: no scripted response left for request #{n + 1} "
            f"({len(self.responses)} given)"
        )
        self.notes.append(note)
        return Fault(status=500, body={"error": {"message": note, "type": "stub_exhausted"}})

    async def _fault(self, fault: Fault, writer: asyncio.StreamWriter, keep: bool) -> bool:
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.close:
            return False
        body = fault.body
        if body is None:
            body = {"error": {"message": f"stub fault {fault.status}", "type": "server_error"}}
        await self._write(writer, fault.status, body, keep, fault.headers)
        return keep

    def _completion_body(self, reply: str | dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        if isinstance(reply, dict) and "choices" in reply:
            return reply
        n = self._served - 1
        spec: dict[str, Any] = {"content": reply} if isinstance(reply, str) else reply
        calls = [_wire_call(call, n, i) for i, call in enumerate(spec.get("tool_calls") or [])]
        message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
        if spec.get("reasoning_content") is not None:
            message["reasoning_content"] = spec["reasoning_content"]
        if calls:
            message["tool_calls"] = calls
        body = {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": data.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": spec.get("finish_reason", "tool_calls" if calls else "stop"),
                }
            ],
        }
        overrides = spec.get("usage", {})
        if self.report_usage and overrides is not None:
            body["usage"] = self._usage(overrides, data)
        return body

    def _usage(self, overrides: Mapping[str, int], data: dict[str, Any]) -> dict[str, Any]:
        usage = dict(self.usage)
        if self.counts_tools and data.get("tools"):
            usage["prompt_tokens"] += len(json.dumps(data["tools"])) // 3
        usage.update(overrides)
        return {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"]},
        }

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: dict[str, Any] | str,
        keep: bool,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json"]
        lines.append(f"Connection: {'keep-alive' if keep else 'close'}")
        lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
        if self.chunked:
            lines.append("Transfer-Encoding: chunked")
            payload = _chunk(payload)
        else:
            lines.append(f"Content-Length: {len(payload)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()


def _wire_call(call: dict[str, Any], n: int, i: int) -> dict[str, Any]:
    """A tool call in wire format, from ``{"name", "arguments"}`` or a partial wire call."""
    if isinstance(call.get("function"), dict):
        function = dict(call["function"])
    else:
        function = {"name": call.get("name"), "arguments": call.get("arguments", {})}
    if isinstance(function.get("arguments"), (dict, list)):
        function["arguments"] = json.dumps(function["arguments"], ensure_ascii=False)
    return {"id": call.get("id", f"call_{n}_{i}"), "type": "function", "function": function}


def stream_events(body: dict[str, Any], style: StreamStyle, *, with_usage: bool) -> list[str]:
    """The ``data`` of each event that streams the completion ``body`` in ``style``."""
    choice = body["choices"][0]
    message = choice.get("message") or {}
    base: dict[str, Any] = {key: body[key] for key in ("id", "created", "model") if key in body}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        if style.null_content and "content" not in delta:
            delta = {"content": None, **delta}
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks: list[dict[str, Any]] = []
    if style.role_chunk:
        chunks.append(chunk({"role": "assistant", "content": ""}))
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        chunks.extend(chunk({"reasoning_content": part})
                      for part in _pieces(reasoning, style.text_piece))
    content = message.get("content")
    if isinstance(content, str):
        chunks.extend(chunk({"content": part}) for part in _pieces(content, style.text_piece))
    calls = [] if style.drop_calls else list(message.get("tool_calls") or [])
    chunks.extend(chunk({"tool_calls": deltas}) for deltas in _call_deltas(calls, style))
    finish = style.finish_reason or choice.get("finish_reason")
    last = chunk({}, finish)
    usage = body.get("usage")
    if with_usage and usage and style.usage == "final":
        last["usage"] = usage
    chunks.append(last)
    if with_usage and usage and style.usage == "separate":
        chunks.append({**base, "choices": [], "usage": usage})
    events = [json.dumps(c, ensure_ascii=False) for c in chunks]
    return [*events, "[DONE]"] if style.done else events


def _call_deltas(calls: list[dict[str, Any]], style: StreamStyle) -> list[list[dict[str, Any]]]:
    """The tool-call deltas of each chunk that streams ``calls``."""
    if style.calls_in_one_chunk and calls:
        whole = [dict(call, index=i) for i, call in enumerate(calls)]
        if style.no_index:
            whole = [{k: v for k, v in call.items() if k != "index"} for call in whole]
        return [whole]
    out: list[list[dict[str, Any]]] = []
    for i, call in enumerate(calls):
        function = call.get("function") or {}
        name, arguments = function.get("name"), str(function.get("arguments") or "")
        pieces = _pieces(arguments, style.argument_piece)
        first = pieces.pop(0) if style.arguments_with_head and pieces else ""
        index = 0 if style.shared_index else i
        head = {"index": index, "id": call.get("id"), "type": "function",
                "function": {"name": name, "arguments": first}}
        out.append([head])
        for piece in pieces:
            fragment: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if style.name_every_chunk:
                fragment = {"index": index, "id": call.get("id"), "type": "function",
                            "function": {"name": name, "arguments": piece}}
            out.append([fragment])
    if style.no_index:
        out = [[{k: v for k, v in d.items() if k != "index"} for d in ds] for ds in out]
    return out


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunk(payload: bytes) -> bytes:
    """``payload`` in chunked transfer encoding, in three chunks (to exercise parsers)."""
    step = max(1, len(payload) // 3 + 1)
    parts = [payload[i : i + step] for i in range(0, len(payload), step)]
    encoded = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
    return encoded + b"0\r\n\r\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a stub that always answers ``--content``, until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--content", default="ok")
    parser.add_argument("--reply", action="append", default=[],
                        help="Repeatable (overrides --content): the Nth reply answers a "
                        "request carrying N-1 observations, the last one any later request; "
                        "so each session gets a ReAct action, then a final answer. \\n in "
                        "the text is a line break.")
    args = parser.parse_args(argv)
    replies: list[str] = [text.replace("\\n", "\n") for text in args.reply] or [args.content]

    def reply(data: dict[str, Any], _n: int) -> str:
        seen = sum(1 for m in data.get("messages", []) if m.get("role") == "tool" or str(
            m.get("content") or "").startswith("Observation:"))
        return replies[min(seen, len(replies) - 1)]

    async def serve() -> None:
        stub = StubServer(reply, latency=args.latency, host=args.host, port=args.port)
        async with stub:
            print(stub.base_url, flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()

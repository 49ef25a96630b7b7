"""endpoint_embedder against the stub server's real /v1/embeddings over 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from miniagent import (
    ConfigError,
    Memory,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    UserError,
)
from miniagent.memory import endpoint_embedder
from miniagent.memory.embed import _embeddings
from miniagent.testing.embeddings import trigram_embedding
from miniagent.testing.stub_server import StubServer


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(model="embedder").run_in_thread() as server:
        yield server


def test_the_vectors_are_the_servers_in_order(stub: StubServer) -> None:
    embed = endpoint_embedder(stub.base_url, "bge", api_key="sk-test", dimensions=32)
    vectors = embed(["first text", "第二段文字"])
    assert vectors == [trigram_embedding("first text", 32), trigram_embedding("第二段文字", 32)]
    assert stub.embedding_requests == [{"model": "bge", "input": ["first text", "第二段文字"],
                                        "dimensions": 32}]


def test_a_memory_searches_with_the_endpoint(stub: StubServer, tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embed=endpoint_embedder(stub.base_url, "bge")) as memory:
        tokyo = memory.add("The user lives in Tokyo.")
        memory.add("Cats sleep most of the day.")
        # "Tokyoite" shares no term with the text; its character trigrams are close enough
        assert memory.search("Tokyoite", k=1)[0].id == tokyo
        assert len(stub.embedding_requests) == 3


async def test_from_async_code_through_the_a_methods(stub: StubServer) -> None:
    with Memory(embed=endpoint_embedder(stub.base_url, "bge")) as memory:
        item_id = await memory.aadd("会议改到周四下午。")
        assert [i.id for i in await memory.asearch("会议")] == [item_id]
        with pytest.raises(UserError, match=r"use Memory\.aadd / asearch"):
            memory.add("called on the event loop's own thread")


def test_an_error_answer_raises(stub: StubServer) -> None:
    with pytest.raises(ModelHTTPError, match="answered 400") as caught:
        endpoint_embedder(stub.base_url, "bge", dimensions=0)(["x"])
    assert caught.value.status == 400 and "dimensions" in caught.value.body


@pytest.mark.parametrize("body", [
    {}, {"data": []}, {"data": [{"index": 0}]}, {"data": [{"embedding": [1.0], "index": 5}]},
    {"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 0}]}, [1, 2],
])
def test_a_body_that_is_not_an_embeddings_list_is_refused(body: object) -> None:
    with pytest.raises(ValueError):
        _embeddings(body, 2 if isinstance(body, dict) and len(body.get("data", [])) == 2 else 1)


def test_an_unreachable_server_is_a_model_error() -> None:
    with pytest.raises(ModelConnectionError):
        endpoint_embedder("http://127.0.0.1:9/v1", "bge", timeout=5)(["x"])


def test_a_bad_url_or_key_is_refused_at_once() -> None:
    with pytest.raises(ConfigError):
        endpoint_embedder("ftp://host/v1", "bge")
    with pytest.raises(ConfigError):
        endpoint_embedder("http://127.0.0.1:8000/v1", "bge", api_key="a\nb")


class _Answers(BaseHTTPRequestHandler):
    """Answers every POST with ``status`` and ``body``."""

    status, body = 200, b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "body", "error", "message"), [
    (200, b'{"object": "list", "note": "no data"}', ModelResponseError, "no embeddings list"),
    (200, b"<html>", ModelResponseError, "no embeddings list"),
    (503, b'{"error": "overloaded"}', ModelHTTPError, "answered 503: .*overloaded"),
])
def test_an_answer_that_is_not_embeddings_raises(status: int, body: bytes,
                                                 error: type[Exception], message: str) -> None:
    handler = type("Handler", (_Answers,), {"status": status, "body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        embed = endpoint_embedder(f"http://127.0.0.1:{server.server_port}/v1", "bge")
        with pytest.raises(error, match=message):
            embed(["x"])
    finally:
        server.shutdown()
        server.server_close()

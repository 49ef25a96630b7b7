"""The stub server's /v1/embeddings: deterministic trigram vectors, beside the chat script."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from typing import Any

import pytest

from miniagent.testing.embeddings import trigram_embedding
from miniagent.testing.stub_server import StubServer


def post(url: str, body: object) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))  # the vectors have length 1


def test_embeddings_are_deterministic_unit_vectors_that_follow_shared_trigrams() -> None:
    with StubServer(["the chat answer"]).run_in_thread() as stub:
        status, body = post(f"{stub.base_url}/embeddings",
                            {"model": "e", "input": ["Tokyo tower", "Tokyo towers", "zebra"]})
        assert status == 200 and stub.requests == []  # the chat script is untouched
        first, close, far = (entry["embedding"] for entry in body["data"])
        assert [entry["index"] for entry in body["data"]] == [0, 1, 2]
        assert len(first) == 64 and math.isclose(cosine(first, first), 1.0)
        assert cosine(first, close) > 0.8 > cosine(first, far)
        assert first == trigram_embedding("Tokyo tower")
        status, again = post(f"{stub.base_url}/embeddings",
                             {"input": "Tokyo tower", "dimensions": 8})
        assert status == 200 and again["data"][0]["embedding"] == trigram_embedding(
            "Tokyo tower", 8)
        assert len(stub.embedding_requests) == 2


@pytest.mark.parametrize("body", [
    {"input": []}, {"input": [1, 2]}, {"input": None}, {"input": "x", "dimensions": 0},
    {"input": "x", "dimensions": "64"}, ["not", "an", "object"],
])
def test_a_bad_request_is_answered_400(body: object) -> None:
    with StubServer().run_in_thread() as stub:
        status, answer = post(f"{stub.base_url}/embeddings", body)
        assert status == 400 and answer["error"]["message"]

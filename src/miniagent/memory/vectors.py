"""Embeddings as SQLite blobs, cosine similarity in plain Python, and reciprocal rank fusion.

A vector is stored as the bytes of an ``array('f')`` (float32, native byte order), scaled to
length 1, so that cosine similarity is a dot product. A search reads every vector of the
namespace and scores it in Python: no NumPy, no SQLite extension. The cost is linear in
items times dimensions, about 80 ns per dimension per item on CPython 3.11 (less with
:func:`math.sumprod`, from 3.12): ``benchmarks/memory.py`` measured 60 ms per search at
10,000 items of 64 dimensions and 0.5 s at 100,000, so some 2 s at 100,000 items of 256 and
10 s of 1,536. That suits a personal or per-agent memory up to ~100,000 items with short
embeddings (ask for fewer dimensions: ``endpoint_embedder(dimensions=...)``); past that, an
index built for it (sqlite-vec, a vector database) is the tool.

Hybrid ranking fuses the BM25 list and the cosine list by reciprocal rank fusion (Cormack,
Clarke and Büttcher, SIGIR 2009): an item's score is the sum over the lists it is in of
``1 / (RRF_K + rank)``, rank counted from 1. It needs no calibration between BM25 scores
and cosines, whose scales have nothing in common.

Example:
    >>> fuse([["a", "b", "c"], ["c", "a"]])[:2]
    [('a', 0.03252247488101534), ('c', 0.032266458495966696)]
    >>> unpack(pack([3.0, 4.0]))
    array('f', [0.6000000238418579, 0.800000011920929])
"""

from __future__ import annotations

import heapq
import math
import operator
from array import array
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, TypeVar

from miniagent.core.errors import UserError

__all__ = ["MAX_DIMENSIONS", "RRF_K", "fuse", "pack", "top_cosine", "unpack"]

RRF_K = 60
"""The constant of reciprocal rank fusion, the value of its paper: it damps the weight of the
first ranks, so that an item high in both lists beats one first in a single list."""

MAX_DIMENSIONS = 8192
"""The longest embedding accepted (OpenAI's largest model has 3,072)."""

K = TypeVar("K", bound=Hashable)

_dot: Any = getattr(math, "sumprod", None) or (
    lambda a, b: sum(map(operator.mul, a, b)))


def checked_vectors(raw: object, count: int) -> list[list[float]]:
    """What an embedder returned, as ``count`` lists of finite floats of one length."""
    if not isinstance(raw, (list, tuple)) or len(raw) != count:
        got = f"{len(raw)} vectors" if isinstance(raw, (list, tuple)) else type(raw).__name__
        raise UserError(f"the embedder must return one vector per text ({count}), got {got}")
    vectors: list[list[float]] = []
    for vector in raw:
        if not isinstance(vector, (list, tuple, array)) or not 1 <= len(vector) <= MAX_DIMENSIONS:
            raise UserError(f"an embedding must be a list of 1 to {MAX_DIMENSIONS} numbers")
        try:
            numbers = [float(x) for x in vector]
        except (TypeError, ValueError):
            raise UserError("an embedding must hold only numbers") from None
        if not all(math.isfinite(x) for x in numbers):
            raise UserError("an embedding holds a NaN or an infinite number")
        vectors.append(numbers)
    if len({len(v) for v in vectors}) > 1:
        raise UserError("the embedder returned vectors of different lengths")
    return vectors


def pack(vector: Sequence[float]) -> bytes:
    """``vector`` scaled to length 1 (a zero vector as it is), as float32 bytes."""
    norm = math.sqrt(_dot(vector, vector))
    return array("f", [x / norm for x in vector] if norm else vector).tobytes()


def unpack(blob: bytes) -> array[float]:
    vector = array("f")
    vector.frombytes(blob)
    return vector


def top_cosine(query: Sequence[float], rows: Iterable[tuple[K, bytes]], n: int
               ) -> list[tuple[float, K]]:
    """The ``n`` rows most similar to ``query`` (``(key, packed vector)`` pairs, as
    :func:`pack` made them), best first, as ``(cosine, key)``."""
    unit = unpack(pack(query)).tolist()
    scored = ((_dot(unit, unpack(blob)), key) for key, blob in rows)
    return heapq.nlargest(n, scored, key=operator.itemgetter(0))


def fuse(rankings: Iterable[Sequence[K]]) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of ``rankings`` (each best first): ``(key, score)``, best
    first; equal scores keep the order in which the keys were first seen."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])

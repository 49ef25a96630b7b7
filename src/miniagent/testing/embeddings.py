"""A cheap, deterministic embedding for tests and benchmarks: hashed character trigrams.

Texts that share character trigrams (words, their stems, Chinese character triples) get
vectors with a high cosine; it knows no synonyms, so it is a stand-in for an embedding model,
not one. The stub server answers ``/v1/embeddings`` with it.

Example:
    >>> len(trigram_embedding("hello", 16))
    16
    >>> trigram_embedding("Hello  world") == trigram_embedding("hello world")
    True
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

__all__ = ["DEFAULT_DIMENSIONS", "trigram_embedder", "trigram_embedding"]

DEFAULT_DIMENSIONS = 64


def trigram_embedding(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """Counts of ``text``'s character trigrams (lower-cased, whitespace collapsed, padded
    with a space), hashed into ``dimensions`` buckets by CRC-32, scaled to length 1."""
    padded = f" {' '.join(text.lower().split())} "
    vector = [0.0] * dimensions
    for i in range(len(padded) - 2):
        vector[zlib.crc32(padded[i:i + 3].encode("utf-8")) % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def trigram_embedder(dimensions: int = DEFAULT_DIMENSIONS
                     ) -> Callable[[list[str]], list[list[float]]]:
    """An embedder (``texts -> vectors``) of :func:`trigram_embedding`, for ``Memory(embed=)``."""
    return lambda texts: [trigram_embedding(text, dimensions) for text in texts]

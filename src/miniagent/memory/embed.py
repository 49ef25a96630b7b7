"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, llama.cpp's server
with ``--embeddings``, Ollama, OpenAI), through miniagent's own HTTP client.

The embedder is a sync function, as :class:`~miniagent.memory.Memory` wants: each call runs
one request to completion on an event loop of its own, with a client of its own (closed after
it). So it must not be called from a thread running an event loop: from async code, use the
memory's ``a``-methods, which call it on a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from miniagent._internal.aio import run_coroutine
from miniagent.core.errors import ModelHTTPError, ModelResponseError, UserError
from miniagent.core.models.http import HttpClient
from miniagent.core.models.openai_compat import _checked_api_key, _checked_base_url

__all__ = ["endpoint_embedder"]


def endpoint_embedder(base_url: str, model: str, api_key: str | None = None, *,
                      timeout: float = 30.0, dimensions: int | None = None
                      ) -> Callable[[list[str]], list[list[float]]]:
    """A function that embeds texts with ``POST {base_url}/embeddings``.

    Args:
        base_url: The API root, ending in ``/v1`` (as for
            :class:`~miniagent.OpenAICompatibleModel`).
        model: The ``model`` field of each request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` when set.
        timeout: Seconds per request.
        dimensions: Ask for embeddings of this length (OpenAI's ``text-embedding-3``
            models shorten theirs); shorter ones make semantic search faster.

    Returns:
        ``embed(texts) -> list[list[float]]``, one embedding per text, in order.

    Raises:
        ConfigError: ``base_url`` or ``api_key`` cannot work (at once, not at the first call).

    The returned function raises :class:`~miniagent.core.errors.ModelHTTPError` for a non-2xx
    answer, :class:`~miniagent.core.errors.ModelResponseError` for a body that is not an
    embeddings list, and the HTTP client's errors when the server cannot be reached.

    Example:
        >>> embed = endpoint_embedder("http://127.0.0.1:8000/v1", "bge-small")
        >>> callable(embed)
        True
    """
    url = _checked_base_url(base_url) + "/embeddings"
    key = _checked_api_key(api_key)
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"

    async def request(texts: list[str]) -> list[list[float]]:
        body: dict[str, object] = {"model": model, "input": texts}
        if dimensions is not None:
            body["dimensions"] = dimensions
        client = HttpClient(max_connections=1)
        try:
            response = await client.post_json(url, body, headers, timeout)
        finally:
            await client.aclose()
        if not 200 <= response.status < 300:
            raise ModelHTTPError(f"POST {url} answered {response.status}: "
                                 f"{response.text()[:300]}", status=response.status,
                                 body=response.text())
        try:
            return _embeddings(response.json(), len(texts))
        except ValueError as exc:
            raise ModelResponseError(f"POST {url} answered with no embeddings list ({exc}): "
                                     f"{response.text()[:300]}") from None

    def embed(texts: list[str]) -> list[list[float]]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_coroutine(request(list(texts)))
        raise UserError("the endpoint embedder was called on a thread running an event loop; "
                        "from async code use Memory.aadd / asearch, which run it elsewhere")

    return embed


def _embeddings(body: object, count: int) -> list[list[float]]:
    """The vectors of an ``/embeddings`` answer, in the order of the texts."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise ValueError(f"expected 'data' with {count} entries")
    ordered: list[list[float] | None] = [None] * count
    for position, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("embedding"), list):
            raise ValueError("an entry has no 'embedding' list")
        index = entry.get("index", position)
        if not isinstance(index, int) or not 0 <= index < count or ordered[index] is not None:
            raise ValueError(f"an entry has a bad 'index' ({index!r})")
        ordered[index] = entry["embedding"]
    return [vector for vector in ordered if vector is not None]

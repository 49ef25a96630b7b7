"""The data converter every miniagent client and worker uses.

Temporal's pydantic payload converter carries the data contracts (dataclasses included) as
plain JSON, which the Temporal UI and ``temporal workflow show/query/result`` display as it is.
Only a payload of :data:`COMPRESS_FROM` bytes or more (Temporal's own warning size; a model
call's input carries the whole transcript) is zlib-compressed, so that it stays under the 2 MB
limit longer. The size a payload has after this codec is what counts against that limit, so
:func:`encoded_size` (pure and deterministic: safe in workflow code) measures exactly that.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence

from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
)

ENCODING = b"binary/zlib"
COMPRESS_FROM = 512 * 1024
"""Payloads smaller than this travel as readable JSON (Temporal warns about larger ones)."""


def _compressed(payload: Payload) -> Payload:
    if payload.ByteSize() < COMPRESS_FROM:
        return payload
    return Payload(metadata={"encoding": ENCODING},
                   data=zlib.compress(payload.SerializeToString(), 1))


class ZlibCodec(PayloadCodec):
    """zlib, level 1, for payloads from :data:`COMPRESS_FROM` bytes (the rest pass as they
    are)."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [_compressed(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                out.append(payload)
                continue
            inner = Payload()
            inner.ParseFromString(zlib.decompress(payload.data))
            out.append(inner)
        return out


_shared_adapter = functools.lru_cache(maxsize=256)(TypeAdapter)
"""Type adapters by type, for every converter of this process: a workflow sandbox builds a
payload converter for each workflow, and building the adapter of a session's types again in
each one cost the worker about as much as the rest of the workflow (it is pure, and this
module is passed through the sandbox, so one cache serves them all)."""


class _SharedAdaptersJSON(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON, with the process-wide type adapter cache."""

    def __init__(self) -> None:
        super().__init__(max_cached_type_adapters=0)
        self._type_adapter = _shared_adapter


class PayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, with pydantic JSON (shared adapters) for JSON."""

    def __init__(self) -> None:
        json_converter = _SharedAdaptersJSON()
        super().__init__(*(json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                           for c in DefaultPayloadConverter.default_encoding_payload_converters))


def data_converter() -> DataConverter:
    """Pydantic JSON payloads, zlib-compressed only from :data:`COMPRESS_FROM` bytes."""
    return DataConverter(payload_converter_class=PayloadConverter, payload_codec=ZlibCodec())


def encoded_size(payload: Payload, limit: int) -> int:
    """The size ``payload`` will have on the wire (compressed only when it is over ``limit``
    uncompressed, which is the only case where the exact figure matters)."""
    size = payload.ByteSize()
    return size if size <= limit else _compressed(payload).ByteSize()

"""An MCP ``CallToolResult`` as observation text.

Text parts are joined; ``structured_content``, when the server sends it, is preferred over
the text parts (which by convention repeat it), except when it only wraps them (one key whose
value is the text, as in ``{"result": "..."}``, or the content list itself, as
server-filesystem sends): then the parts themselves are the observation. Images, audio and
binary resources become a short description (type and size) instead of base64 in the prompt,
wherever they appear: as content parts, and inside structured content (a copy of a part's
payload, a part-shaped object, a ``data:`` URI). Resource links are listed with their URI.
Duck-typed on the SDK's content models, so this module imports no SDK.
"""

from __future__ import annotations

import json
from typing import Any

from miniagent._internal.wording import counted

__all__ = ["describe_size", "result_text"]

_MAX_DEPTH = 64  # deeper structured content is not walked (nor shown) further
_BINARY_KINDS = ("image", "audio")


def result_text(result: Any) -> str:
    """The observation text of a ``CallToolResult`` (error or not)."""
    blocks = list(getattr(result, "content", None) or [])
    structured = getattr(result, "structured_content", None)
    if structured is None or _wraps(structured, blocks):
        return "\n".join(text for text in map(block_text, blocks) if text)
    parts = [json.dumps(_without_binary(structured, _payloads(blocks), 0), ensure_ascii=False)]
    for block in blocks:
        if getattr(block, "type", None) == "text":
            continue  # the text parts repeat the structured content
        text = block_text(block)
        if text:
            parts.append(text)
    return "\n".join(parts)


def block_text(block: Any) -> str:
    """One content block as text; binary payloads only described."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in _BINARY_KINDS:
        return f"[{kind}: {_mime(block)}, {describe_size(_decoded_size(block.data))}]"
    if kind == "resource_link":
        return _link_text(block)
    if kind == "resource":
        return _resource_text(block.resource)
    return f"[{kind or 'unknown'} content]"


# -- structured content -------------------------------------------------------------------

def _wraps(structured: Any, blocks: list[Any]) -> bool:
    """Whether ``structured`` only wraps the content: one key holding the joined text (or a
    value whose JSON is that text), or a list shaped like the content parts."""
    if not isinstance(structured, dict) or len(structured) != 1:
        return False
    [value] = structured.values()
    if isinstance(value, list):
        return bool(blocks) and len(value) == len(blocks) and all(
            _same_part(item, block) for item, block in zip(value, blocks, strict=True))
    texts = [str(b.text) for b in blocks if getattr(b, "type", None) == "text"]
    if not texts:
        return False
    text = "\n".join(texts)
    if value == text:
        return True
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
        return False


def _same_part(item: Any, block: Any) -> bool:
    """Whether ``item`` (of a structured list) is the content part ``block``: same type, and
    the same text for a text part."""
    kind = getattr(block, "type", None)
    return isinstance(item, dict) and item.get("type") == kind and (
        kind != "text" or item.get("text") == getattr(block, "text", None))


def _payloads(blocks: list[Any]) -> dict[str, str]:
    """The base64 payloads of the binary parts, each with its description."""
    found: dict[str, str] = {}
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind in _BINARY_KINDS and isinstance(getattr(block, "data", None), str):
            found[block.data] = block_text(block)
        elif kind == "resource" and isinstance(getattr(block.resource, "blob", None), str):
            found[block.resource.blob] = block_text(block)
    return found


def _without_binary(value: Any, payloads: dict[str, str], depth: int) -> Any:
    """``value`` with every binary payload in it replaced by its description."""
    if depth > _MAX_DEPTH:
        return "[nested too deep]"
    if isinstance(value, str):
        return payloads.get(value) or _data_uri(value) or value
    if isinstance(value, list):
        return [_without_binary(item, payloads, depth + 1) for item in value]
    if isinstance(value, dict):
        return _binary_object(value) or {
            key: _without_binary(item, payloads, depth + 1) for key, item in value.items()}
    return value


def _binary_object(value: dict[str, Any]) -> str | None:
    """The description of an object shaped like a binary part (``{"type": "image", "data":
    ...}``, a resource's ``blob``, or base64 ``data`` with a non-text ``mimeType``)."""
    mime = value.get("mimeType") or value.get("mime_type")
    if isinstance(value.get("blob"), str):
        payload, kind = value["blob"], "blob"
    elif isinstance(value.get("data"), str) and (
            value.get("type") in _BINARY_KINDS
            or (isinstance(mime, str) and not mime.startswith("text/"))):
        payload, kind = value["data"], str(value.get("type") or "data")
    else:
        return None
    mime = mime if isinstance(mime, str) else "application/octet-stream"
    return f"[{kind}: {mime}, {describe_size(_decoded_size(payload))}]"


def _data_uri(text: str) -> str | None:
    """A description of a base64 ``data:`` URI (``data:image/png;base64,...``)."""
    head, comma, _ = text[:200].partition(",")
    if not (text.startswith("data:") and comma and head.endswith(";base64")):
        return None
    mime = head[5:-7].split(";")[0] or "application/octet-stream"
    return f"[data: {mime}, {describe_size(_decoded_size(text[len(head) + 1:]))}]"


# -- parts --------------------------------------------------------------------------------

def _link_text(link: Any) -> str:
    details = [value for value in (getattr(link, "mime_type", None),
                                   _size_or_none(getattr(link, "size", None))) if value]
    description = getattr(link, "description", None)
    text = f"[resource link: {link.name} <{link.uri}>"
    if details:
        text += f" ({', '.join(details)})"
    if description:
        text += f": {description}"
    return text + "]"


def _resource_text(resource: Any) -> str:
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return f"[resource {resource.uri}]\n{text}"
    blob = getattr(resource, "blob", "") or ""
    return (f"[resource {resource.uri}: {_mime(resource)}, "
            f"{describe_size(_decoded_size(blob))}]")


def _mime(item: Any) -> str:
    return str(getattr(item, "mime_type", None) or "application/octet-stream")


def _size_or_none(size: Any) -> str | None:
    return describe_size(size) if isinstance(size, int) else None


def _decoded_size(data: Any) -> int:
    """Bytes a base64 payload stands for, from its length (no decoding of megabytes)."""
    if isinstance(data, bytes | bytearray):
        return len(data)
    text = "".join(str(data or "").split())
    if len(text) % 4:  # not base64: say how long it is
        return len(text)
    return len(text) * 3 // 4 - len(text) + len(text.rstrip("="))


def describe_size(size: int) -> str:
    """``512 bytes``, ``12.3 kB``, ``4.0 MB``."""
    if size < 1000:
        return counted(size, 'byte')
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"

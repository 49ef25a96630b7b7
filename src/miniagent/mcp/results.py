"""An MCP ``CallToolResult`` as observation text.

Text parts are joined; ``structured_content``, when the server sends it, is preferred over
the text parts (which by convention repeat it); images, audio and binary resources become a
short description (type and size) instead of base64 in the prompt; resource links are listed
with their URI. Duck-typed on the SDK's content models, so this module imports no SDK.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["describe_size", "result_text"]


def result_text(result: Any) -> str:
    """The observation text of a ``CallToolResult`` (error or not)."""
    blocks = list(getattr(result, "content", None) or [])
    structured = getattr(result, "structured_content", None)
    parts: list[str] = []
    if structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    for block in blocks:
        if structured is not None and getattr(block, "type", None) == "text":
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
    if kind in ("image", "audio"):
        return f"[{kind}: {_mime(block)}, {describe_size(_decoded_size(block.data))}]"
    if kind == "resource_link":
        return _link_text(block)
    if kind == "resource":
        return _resource_text(block.resource)
    return f"[{kind or 'unknown'} content]"


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
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"

"""Session ids in the inbox's URLs: one path segment each, whatever the id holds.

An id is a segment of ``/sessions/ID/...``, percent-encoded whole. That is not enough for every
id: the server decodes ``%2F`` before routing (``a/b`` would be two segments), and browsers
resolve the segments ``.`` and ``..`` (also written ``%2E``) before they send a request; some
clients and proxies decode a path twice, which would turn an id's ``%2F`` into ``/``. Such ids
(with ``/`` or ``%``, all dots, empty, or starting with ``~``) are written ``~`` and their UTF-8
bytes in base64url instead, which routes as one plain segment; ``~`` starts no other id's
segment, so the two spellings never meet.

Example:
    >>> segment("s1"), segment("team/a"), segment("..")
    ('s1', '~dGVhbS9h', '~Li4')
    >>> [SessionIdConvertor().convert(s) for s in ("s1", "~dGVhbS9h", "~Li4")]
    ['s1', 'team/a', '..']
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import quote

from starlette.convertors import Convertor, register_url_convertor

MARK = "~"


def _spelled(session_id: str) -> bool:
    """Whether the id needs its base64 spelling to route as one segment."""
    return ("/" in session_id or "%" in session_id or session_id.strip(".") == ""
            or session_id.startswith(MARK))


def segment(session_id: str) -> str:
    """The id as one URL path segment (see the module's docstring)."""
    if _spelled(session_id):
        raw = session_id.encode("utf-8", "surrogatepass")
        return MARK + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    return quote(session_id, safe="")


class SessionIdConvertor(Convertor[str]):
    """The ``{sid:session_id}`` of a route: one segment, read back into the id."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        if not value.startswith(MARK):
            return value
        body = value[len(MARK):]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            return raw.decode("utf-8", "surrogatepass")
        except (binascii.Error, ValueError):
            return value  # no session has this id: its page says so

    def to_string(self, value: str) -> str:
        return segment(value)


register_url_convertor("session_id", SessionIdConvertor())

"""Who may use the inbox, and which requests may change anything.

- **Host**: every request must name an allowed host (loopback names by default), so a page on
  another site that rebinds its DNS name to 127.0.0.1 is refused.
- **Peer**: a server without a token answers only clients on this machine (a loopback peer
  address, or a Unix socket), whatever their ``Host`` header says.
- **Token**: ``miniagent ui`` always has one (drawn at start unless given), because loopback
  is no boundary between the users of one machine. It is typed once in the form at
  ``/login``, or a one-time login link printed at start is opened (the token itself never
  goes in a URL, where history and access logs would keep it); compared with
  :func:`hmac.compare_digest`; the browser then holds a cookie (``HttpOnly``,
  ``SameSite=Strict``) signed with a key this process drew at start. Wrong tokens are
  throttled per client address, so a stranger's guesses do not lock the owner out from
  another one.
- **CSRF**: every POST carries a token derived from that cookie (an HMAC, checked in constant
  time), and an ``Origin`` (or, without one, a ``Referer``) of this very host.

Without a token, a browser still gets a (signed, anonymous) cookie: the CSRF token is bound
to it. Restarting the server draws a new key: old cookies are refused, and a person logs in
again.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

COOKIE = "miniagent_ui"
"""The name of the browser's cookie."""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The host names a server bound to a loopback address answers to."""

MAX_FORM_BYTES = 64 * 1024
"""A larger form body is refused (a reason, a question: far less)."""

MIN_TOKEN_CHARS = 16

LINK_SECONDS = 15 * 60.0
"""How long a one-time login link works (once)."""

MAX_LINKS = 16
"""At most this many one-time login links are valid at once (the oldest go first)."""


class Refused(Exception):
    """A request refused before it reaches its page; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Gate:
    """The key, the token and the allowed hosts of one server.

    Args:
        token: The login token (None: no login; only for a server that only loopback
            clients reach).
        allowed_hosts: Host names (without port) requests may name; ``"*"`` allows any (a
            server behind a token on ``0.0.0.0``, reached by several names).
    """

    token: str | None = None
    allowed_hosts: Iterable[str] = LOOPBACK_HOSTS
    key: bytes = field(default_factory=lambda: os.urandom(32))
    _links: OrderedDict[str, float] = field(default_factory=OrderedDict, repr=False)

    def __post_init__(self) -> None:
        self.allowed_hosts = frozenset(h.lower().strip("[]") for h in self.allowed_hosts)
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the login token must have at least {MIN_TOKEN_CHARS} characters "
                             f"(it has {len(self.token)})")

    # -- hosts and origins ----------------------------------------------------------------

    def check_host(self, host_header: str | None) -> None:
        """Raise Refused unless ``Host`` names an allowed host."""
        if host_header is None:
            raise Refused(400, "the request names no Host")
        if "*" in self.allowed_hosts:
            return
        if _hostname(host_header) not in self.allowed_hosts:
            raise Refused(421, "this server does not answer to that Host name")

    @staticmethod
    def check_origin(scheme: str, host_header: str, origin: str | None,
                     referer: str | None) -> None:
        """Raise Refused unless the request came from a page of this very server."""
        expected = f"{scheme}://{host_header}".lower()
        if origin and origin != "null":
            if origin.lower() != expected:
                raise Refused(403, "refused: the request came from another site (Origin)")
            return
        if referer:
            parts = urlsplit(referer)
            if f"{parts.scheme}://{parts.netloc}".lower() != expected:
                raise Refused(403, "refused: the request came from another site (Referer)")
            return
        raise Refused(403, "refused: the request says neither where it came from (no Origin "
                           "nor Referer)")

    def check_peer(self, client: tuple[str, int] | list[Any] | None) -> None:
        """Raise Refused unless a server without a token is reached from this machine: the
        ``Host`` header is the client's word, the peer address is the network's."""
        if self.token is None and not is_local_peer(client):
            raise Refused(403, "this inbox has no login token, so it answers only this "
                               "machine; start it with a token to reach it from elsewhere")

    # -- one-time login links -------------------------------------------------------------

    def new_link(self, now: float | None = None) -> str:
        """A login code that works once, within ``LINK_SECONDS``: ``/login?once=CODE``."""
        if self.token is None:
            raise ValueError("a server without a token needs no login link")
        now = time.monotonic() if now is None else now
        code = secrets.token_urlsafe(24)
        self._links[code] = now + LINK_SECONDS
        while len(self._links) > MAX_LINKS:
            self._links.popitem(last=False)
        return code

    def redeem(self, code: str, now: float | None = None) -> bool:
        """Whether ``code`` is a valid login link's; it never works again."""
        now = time.monotonic() if now is None else now
        expiry = None
        for known in list(self._links):  # compared in constant time, each of them
            if hmac.compare_digest(known.encode(), code.encode("utf-8", "replace")):
                expiry = self._links.pop(known)
        return expiry is not None and now < expiry

    # -- cookies --------------------------------------------------------------------------

    def new_cookie(self, *, logged_in: bool) -> str:
        """A new signed cookie value: a random nonce and its MAC."""
        nonce = os.urandom(16).hex()
        return f"{nonce}.{self._mac(_kind(logged_in), nonce)}"

    def cookie_valid(self, value: str | None) -> bool:
        """Whether ``value`` is a cookie this server signed (a logged-in one when a token is
        required)."""
        if not value or value.count(".") != 1:
            return False
        nonce, mac = value.split(".")
        kinds = [_kind(True)] if self.token is not None else [_kind(True), _kind(False)]
        return any(hmac.compare_digest(mac, self._mac(kind, nonce)) for kind in kinds)

    def login(self, given: str) -> bool:
        """Whether ``given`` is the token (compared in constant time)."""
        if self.token is None:
            return True
        return hmac.compare_digest(given.encode("utf-8", "replace"),
                                   self.token.encode("utf-8", "replace"))

    def csrf(self, cookie: str) -> str:
        """The CSRF token of the browser holding ``cookie``."""
        return self._mac("csrf", cookie)

    def check_csrf(self, cookie: str | None, given: str | None) -> None:
        if not cookie or not given or not hmac.compare_digest(given, self.csrf(cookie)):
            raise Refused(403, "refused: the form's CSRF token is missing or wrong (reload the "
                               "page and try again)")

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self.key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def _kind(logged_in: bool) -> str:
    return "auth" if logged_in else "anon"


def _hostname(host_header: str) -> str:
    """``example.org`` of ``example.org:8080``; ``::1`` of ``[::1]:8080``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def is_local_peer(client: tuple[str, int] | list[Any] | None) -> bool:
    """Whether an ASGI ``client`` is on this machine: a loopback address, or none at all
    (a Unix socket, whose file permissions already chose who may connect)."""
    if not client:
        return True
    try:
        return ipaddress.ip_address(str(client[0]).strip("[]")).is_loopback
    except ValueError:
        return False


def cookie_of(header: str | None) -> str | None:
    """The value of this server's cookie in a ``Cookie`` header."""
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed header from a client: no cookie
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def set_cookie(value: str, *, secure: bool = False) -> str:
    """The ``Set-Cookie`` header value of a cookie: HttpOnly, SameSite=Strict, whole site
    (``Secure`` too when the page came over HTTPS)."""
    return f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def parse_form(body: bytes) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (at most ``MAX_FORM_BYTES``), first value
    of each field; raises Refused for a larger or undecodable one."""
    if len(body) > MAX_FORM_BYTES:
        raise Refused(413, f"the form is larger than {MAX_FORM_BYTES:,} bytes")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True,
                          max_num_fields=64, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "the form could not be read") from None
    return {name: values[0] for name, values in fields.items()}


@dataclass
class LoginThrottle:
    """At most ``per_minute`` failed logins a minute from each client address: guessing a
    token of 16 characters or more stays hopeless, a flood of guesses costs nothing, and
    guesses from one address never lock out a person at another. The table keeps at most
    ``max_addresses`` addresses (the least recently failed go first)."""

    per_minute: int = 20
    max_addresses: int = 1024
    _failures: OrderedDict[str, list[float]] = field(default_factory=OrderedDict)

    def allowed(self, address: str = "") -> bool:
        now = time.monotonic()
        recent = [t for t in self._failures.get(address, ()) if now - t < 60]
        if recent:
            self._failures[address] = recent[-self.per_minute:]
        else:
            self._failures.pop(address, None)
        return len(recent) < self.per_minute

    def failed(self, address: str = "") -> None:
        self._failures.setdefault(address, []).append(time.monotonic())
        self._failures.move_to_end(address)
        while len(self._failures) > self.max_addresses:
            self._failures.popitem(last=False)

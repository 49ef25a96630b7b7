"""Keeping credentials out of traces: known secret values, secret-named fields, bearer tokens.

A :class:`Redactor` copies a JSON-like value (dicts, lists, strings, numbers) with every secret
replaced by ``[REDACTED]``:

- the values it was given (an API key, a tool's password), and by default the values of the
  environment variables whose names say they hold one (``OPENAI_API_KEY``, ``WEATHER_TOKEN``,
  ``DB_PASSWORD``, ...), wherever they occur inside a text;
- the whole value of a field named like a credential (``Authorization``, ``api_key``,
  ``password``, ``secret``, ``access_token``, ``cookie``, ...), in tool arguments, headers or
  a server's answer;
- what looks like a credential in free text: ``Bearer <token>``, ``Basic <token>`` and
  ``sk-...`` keys.

Example:
    >>> redact = Redactor(["sk-live-1234567890abcdef"], from_env=False)
    >>> redact({"text": "key sk-live-1234567890abcdef", "headers": {"Authorization": "x"}})
    {'text': 'key [REDACTED]', 'headers': {'Authorization': '[REDACTED]'}}
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["REDACTED", "Redactor", "model_secrets"]

REDACTED = "[REDACTED]"

MIN_SECRET_CHARS = 6
"""Shorter values are not treated as secrets: replacing them would mangle ordinary text."""

_SECRET_KEYS = frozenset({
    "authorization", "proxyauthorization", "apikey", "xapikey", "apitoken", "password",
    "passwd", "passphrase", "secret", "clientsecret", "secretkey", "accesskey", "accesstoken",
    "refreshtoken", "authtoken", "idtoken", "sessiontoken", "bearertoken", "token",
    "privatekey", "cookie", "setcookie", "credentials", "credential",
})
"""Field names (lower case, without ``-`` and ``_``) whose whole value is a secret."""

_SECRET_ENV = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH)(_|$)")
_NOT_SECRET_ENV = re.compile(r"_(SOCK|PATH|FILE|DIR|URL|HOST|PORT)$")

_TOKEN_TEXT = re.compile(
    # a header written out: whatever follows "Authorization:" (scheme and credentials)
    r"(?i)(?P<header>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?:bearer|basic|digest|token)\s+)?[^\s\"',;]+"
    # a bearer or basic credential elsewhere; it has a digit or symbol: "Basic information" stays
    r"|(?P<scheme>\b(?:bearer|basic)\s+)(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{12,}")


def _normal_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of environment variables whose names say they hold a credential."""
    environ = os.environ if environ is None else environ
    return [value for name, value in environ.items()
            if len(value) >= MIN_SECRET_CHARS and _SECRET_ENV.search(name.upper())
            and not _NOT_SECRET_ENV.search(name.upper())]


def model_secrets(model: object) -> list[str]:
    """The credentials a model transport holds (its ``api_key``), for a :class:`Redactor`."""
    key = getattr(model, "api_key", None)
    return [key] if isinstance(key, str) and key else []


class Redactor:
    """Copies values with secrets replaced by :data:`REDACTED` (see the module docstring).

    Args:
        secrets: Values that must never be written (API keys, tool credentials).
        from_env: Also the values of credential-named environment variables, read now.
    """

    def __init__(self, secrets: Iterable[str | None] = (), *, from_env: bool = True) -> None:
        self._secrets: list[str] = []
        for secret in [*secrets, *(env_secrets() if from_env else [])]:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Never write ``secret`` either (values under :data:`MIN_SECRET_CHARS` are ignored)."""
        if secret and len(secret) >= MIN_SECRET_CHARS and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)  # a longer secret first: no partial leak

    def text(self, value: str) -> str:
        """``value`` with every known secret and token-looking text replaced."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return _TOKEN_TEXT.sub(_token_replacement, value)

    def __call__(self, value: Any) -> Any:
        """A copy of the JSON-like ``value``, redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: (REDACTED if isinstance(key, str) and _normal_key(key) in _SECRET_KEYS
                          and value[key] not in (None, "") else self(value[key]))
                    for key in value}
        if isinstance(value, (list, tuple)):
            return [self(item) for item in value]
        return value


def _token_replacement(match: re.Match[str]) -> str:
    return f"{match.group('header') or match.group('scheme') or ''}{REDACTED}"

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
  ``sk-...`` keys, and the quoted value after a credential-named key written as text
  (``"password": "..."``, ``'token': '...'``, ``\\"api_key\\": \\"...\\"`` inside a JSON
  string): a tool call's raw argument text, broken JSON, a Python dict, JSON inside a string;
  and the word after a credential-named key written unquoted (``password: hunter2``,
  ``API_KEY=...``, ``?token=...``), as people write them in a sentence, a note or a URL.

The same rules keep credentials out of long-term memory (:mod:`miniagent.memory`).

Example:
    >>> redact = Redactor(["sk-live-1234567890abcdef"], from_env=False)
    >>> redact({"text": "key sk-live-1234567890abcdef", "headers": {"Authorization": "x"}})
    {'text': 'key [REDACTED]', 'headers': {'Authorization': '[REDACTED]'}}
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["REDACTED", "Redactor", "expand_references", "model_secrets", "redact_command",
           "redact_url"]

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


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return key.lower().replace("-", "").replace("_", "") in _SECRET_KEYS


def _hides(key: object, value: object) -> bool:
    return isinstance(key, str) and _secret_key(key) and value not in (None, "")


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of environment variables whose names say they hold a credential."""
    environ = os.environ if environ is None else environ
    return [value for name, value in environ.items()
            if len(value) >= MIN_SECRET_CHARS and _SECRET_ENV.search(name.upper())
            and not _NOT_SECRET_ENV.search(name.upper())]


def model_secrets(model: object) -> list[str]:
    """The credentials a model transport holds (its ``api_key``; a
    :class:`~miniagent.FallbackModel`'s: those of its models), for a :class:`Redactor`."""
    key = getattr(model, "api_key", None)
    found = [key] if isinstance(key, str) and key else []
    members = getattr(model, "models", ())
    for member in members if isinstance(members, tuple | list) else ():
        found += model_secrets(member)
    return found


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
        return _keyed_values_redacted(_tokens_redacted(value))

    def __call__(self, value: Any) -> Any:
        """A copy of the JSON-like ``value``, redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: REDACTED if _hides(key, value[key]) else self(value[key])
                    for key in value}
        if isinstance(value, (list, tuple)):
            return [self(item) for item in value]
        return value

    def json_line(self, value: Any) -> str:
        """``value`` as one line of JSON (UTF-8 kept), redacted: what :meth:`__call__` and
        ``json.dumps`` give, computed faster for large values (the text is redacted once, as
        a whole line, and only the fields named like credentials are looked for inside)."""
        line = json.dumps(value, ensure_ascii=False, default=repr)
        if any(_secret_key(name) for name in _JSON_KEYS.findall(line)):
            line = json.dumps(_without_secret_fields(value), ensure_ascii=False, default=repr)
        for secret in self._secrets:
            escaped = json.dumps(secret, ensure_ascii=False)[1:-1]  # as it stands in JSON
            if escaped in line:
                line = line.replace(escaped, REDACTED)
        return _keyed_values_redacted(_tokens_redacted(line))


def _without_secret_fields(value: Any) -> Any:
    """``value`` with credential-named fields' values replaced, copied only where it changes;
    an ``arguments`` string holding a JSON object (a wire tool call) is looked into too."""
    if isinstance(value, dict):
        changed: dict[Any, Any] | None = None
        for key, item in value.items():
            if _hides(key, item):
                new: Any = REDACTED
            elif key == "arguments" and isinstance(item, str) and item[:1] == "{":
                new = _arguments_text(item)
            else:
                new = _without_secret_fields(item)
            if new is not item:
                changed = dict(value) if changed is None else changed
                changed[key] = new
        return value if changed is None else changed
    if isinstance(value, list):
        items = [_without_secret_fields(item) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def _arguments_text(text: str) -> str:
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return text
    cleaned = _without_secret_fields(decoded)
    return text if cleaned is decoded else json.dumps(cleaned, ensure_ascii=False)


_JSON_KEYS = re.compile(r'"([A-Za-z0-9_-]{1,64})\\?"\s*:')
"""Object keys in a JSON text, also inside a JSON string (``\\"key\\":``). Only when one names a
credential is the value walked to replace it: a walk of a long history costs more."""

_TOKEN_HINTS = ("authorization", "bearer", "basic", "sk-")
"""Substrings (of the lower-cased text) without which :data:`_TOKEN_TEXT` cannot match: the
regular expression is run only when one is there (it is the costly part on long texts)."""


def _tokens_redacted(text: str) -> str:
    lowered = text.lower()
    if not any(hint in lowered for hint in _TOKEN_HINTS):
        return text
    return _TOKEN_TEXT.sub(_token_replacement, text)


_KEYED = re.compile(r"(?P<open>\\{0,3}[\"'])(?P<key>[A-Za-z0-9_-]{1,64})(?P=open)\s*[:=]\s*"
                    r"(?P<quote>\\{0,3}[\"'])")
"""A quoted key, ``:`` or ``=``, and the opening quote of its value, in text: JSON, a Python
dict, or either escaped inside a JSON string (one to three backslashes before each quote)."""

_KEY_HINTS = ("pass", "token", "secret", "key", "auth", "cookie", "credential")
"""Substrings (lower case) of every credential-named key: without one, nothing is looked for."""


def _keyed_values_redacted(text: str) -> str:
    """The quoted value of every credential-named key replaced, to its closing quote (or to
    the end of a text cut off inside it)."""
    lowered = text.lower()
    if not any(hint in lowered for hint in _KEY_HINTS):
        return text
    return _quoted_values_redacted(_unquoted_values_redacted(text, lowered))


_KEYED_WORD = re.compile(r"(?:(?<![\w\\-])|(?<=\\[nrt]))(?P<key>[A-Za-z][A-Za-z0-9_-]{0,63})"
                         r"[ \t]*[:=][ \t]*(?=(?P<value>[^\s,;&\"'\\}\])]+))")
"""An unquoted key (at a word's start, or after an escaped newline or tab inside a JSON
string), ``:`` or ``=``, and the word after it: ``password: x``, ``API_KEY=x``, ``?token=x``.
The word ends at a space, a quote, a backslash or a separator. The word is looked ahead at,
not taken, so that a key inside an ordinary key's word (``http://h/?token=x``) is found too."""


def _unquoted_values_redacted(text: str, lowered: str) -> str:
    """The word after every unquoted credential-named key replaced (see :data:`_KEYED_WORD`).

    The pattern is tried only where a key can begin: at the start of the word around each
    :data:`_KEY_HINTS` found in ``lowered`` (found at C speed: a long text is not scanned
    position by position)."""
    parts: list[str] = []
    last = 0
    for start in _key_starts(text, lowered):
        match = _KEYED_WORD.match(text, start)
        if match is None or start < last:
            continue
        value = match.group("value")
        if not _secret_key(match.group("key")) or value.startswith(REDACTED[:-1]):
            continue
        parts.append(text[last:match.end()])
        parts.append(REDACTED)
        last = match.end() + len(value)
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _key_starts(text: str, lowered: str) -> list[int]:
    """Where the words holding a :data:`_KEY_HINTS` begin (at most 64 characters before it),
    in order."""
    starts: set[int] = set()
    for hint in _KEY_HINTS:
        at = lowered.find(hint)
        while at >= 0:
            start = at
            while start > 0 and at - start < 64 and text[start - 1] in _KEY_CHARS:
                start -= 1
            starts.add(start)
            if start > 0 and text[start - 1] == "\\" and text[start] in "nrt":
                starts.add(start + 1)  # after an escaped newline or tab in a JSON string
            at = lowered.find(hint, at + len(hint))
    return sorted(starts)


def _quoted_values_redacted(text: str) -> str:
    parts: list[str] = []
    last = 0
    for match in _KEYED.finditer(text):
        if match.start() < last or not _secret_key(match.group("key")):
            continue  # inside a value already replaced, or an ordinary key: look inside it too
        end = _closing(text, match.end(), match.group("quote"))
        if end == match.end() + len(match.group("quote")):
            continue  # an empty value hides nothing
        parts.append(text[last:match.end()])
        parts.append(REDACTED + (match.group("quote") if end <= len(text) else ""))
        last = min(end, len(text))
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _closing(text: str, start: int, quote: str) -> int:
    """Just past the quote that closes a value opened at ``start``: the same quote, not
    escaped at its level; past the end of ``text`` when it never closes."""
    at = start
    while True:
        found = text.find(quote, at)
        if found < 0:
            return len(text) + 1
        if found > start and text[found - 1] == "\\":
            at = found + 1
            continue
        return found + len(quote)


def _token_replacement(match: re.Match[str]) -> str:
    return f"{match.group('header') or match.group('scheme') or ''}{REDACTED}"


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}")
"""``${NAME}``: a reference to an environment variable, expanded where it is used and recorded
as it is (never its value)."""


def expand_references(text: str) -> str:
    """``text`` with each ``${NAME}`` replaced by that environment variable's value.

    Raises:
        KeyError: a referenced variable is not set (its name is the message).
    """
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise KeyError(f"the environment variable {name} is not set")
        return os.environ[name]

    return _REFERENCE.sub(value, text)


def _hidden(value: str) -> str:
    return value if _REFERENCE.fullmatch(value) or not value else REDACTED


def redact_url(url: str) -> str:
    """``url`` with its credentials replaced: a ``user:password@`` part, and the value of
    each credential-named query parameter (``?token=...``, ``api_key``); ``${NAME}``
    references stay, they hold no secret."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = urlencode([(k, _hidden(v) if _secret_key(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="${}[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_command(words: Sequence[str]) -> list[str]:
    """A command line's words with the value of each credential-named option replaced
    (``--token X``, ``--api-key=X``, ``PASSWORD=X``); ``${NAME}`` references stay."""
    out: list[str] = []
    hide_next = False
    for word in words:
        if hide_next:
            out.append(_hidden(word))
            hide_next = False
            continue
        name, sep, value = word.partition("=")
        flag = name.lstrip("-")
        if sep and flag and _secret_key(flag):
            out.append(f"{name}={_hidden(value)}")
        else:
            out.append(word)
            hide_next = word.startswith("-") and bool(flag) and _secret_key(flag)
    return out

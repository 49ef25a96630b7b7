"""How messages say a number of things (one place, so that no message reads ``1 steps``), and
how they name an exception (:func:`describe`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from miniagent.core.types import TokenUsage

_ES_ENDINGS = ("s", "x", "z", "ch", "sh")


def plural(noun: str) -> str:
    """The plural of an English ``noun`` (its last word): steps, replies, matches.

    Example:
        >>> plural("task run"), plural("reply"), plural("match")
        ('task runs', 'replies', 'matches')
    """
    if noun.endswith("y") and noun[-2:-1] not in ("", *"aeiou"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(_ES_ENDINGS) else "s")


def counted(n: int, noun: str, plural_form: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1; thousands grouped.

    ``plural_form`` is for a noun whose plural the rules miss (``counted(n, "child",
    "children")``).

    Example:
        >>> counted(1, "step"), counted(2, "step"), counted(12345, "token"), counted(0, "reply")
        ('1 step', '2 steps', '12,345 tokens', '0 replies')
    """
    word = noun if n == 1 else plural_form or plural(noun)
    return f"{n:,} {word}"


def token_count(usage: TokenUsage) -> str:
    """A usage's tokens in words: counted when the server reported them, else marked as an
    estimate (or unknown): never ``0 tokens`` for tokens nobody counted.

    Example:
        >>> from miniagent.core.types import TokenUsage
        >>> token_count(TokenUsage(prompt_tokens=1200, completion_tokens=34))
        '1,234 tokens'
        >>> token_count(TokenUsage.unknown(estimated=1234)), token_count(TokenUsage.unknown())
        ('~1,234 tokens (estimated)', 'tokens unknown')
    """
    total = usage.total_tokens
    if total is not None:
        return counted(total, "token")
    if usage.estimated_tokens:
        return f"~{counted(usage.estimated_tokens, 'token')} (estimated)"
    return "tokens unknown"


def unreported_tokens(usage: TokenUsage) -> str:
    """One model call's tokens its server did not report, in words (with the estimate).

    Example:
        >>> from miniagent.core.types import TokenUsage
        >>> unreported_tokens(TokenUsage.unknown(estimated=809))
        'tokens not reported, ~809 estimated'
    """
    if usage.estimated_tokens:
        return f"tokens not reported, ~{usage.estimated_tokens:,} estimated"
    return "tokens not reported"


def describe(exc: BaseException) -> str:
    """``exc`` as its type and message, for a message (its type alone when ``str(exc)`` is
    empty or fails).

    Example:
        >>> describe(ValueError("no such city")), describe(KeyError())
        ('ValueError: no such city', 'KeyError')
    """
    try:
        message = str(exc)
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__

"""How messages say a number of things: one place, so that no message reads ``1 steps``."""

from __future__ import annotations

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

"""The one estimate of a text's tokens (:func:`tokens`, see :mod:`miniagent.core.runtime.guards`);
what text can be stored is :func:`miniagent.core.session.storable`."""

from __future__ import annotations


def tokens(text: str) -> int:
    """The estimated tokens of ``text``: ASCII at 4 characters a token, any other character 1.

    Example:
        >>> tokens("a" * 40), tokens("北京天气" * 10)
        (10, 40)
    """
    if text.isascii():
        return (len(text) + 3) // 4
    other = len(text) - len(text.encode("ascii", "ignore"))
    return (len(text) - other + 3) // 4 + other

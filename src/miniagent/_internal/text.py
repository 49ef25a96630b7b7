"""Text that can be stored and shown: one definition of "storable", used at every boundary; and
the one estimate of a text's tokens (:func:`tokens`, see :mod:`miniagent.core.runtime.guards`)."""

from __future__ import annotations


def storable(text: str) -> str:
    """``text`` as valid Unicode: surrogate pairs joined, lone surrogates replaced by U+FFFD.

    Lone surrogates come from ``surrogateescape``d file names or a model's broken ``\\ud800``
    escape; no UTF-8 store, terminal or JSON output can encode them. Returns ``text`` itself
    when it has none.

    Example:
        >>> storable("caf\\udce9") == "caf\\ufffd"
        True
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


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

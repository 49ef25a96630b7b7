"""Text that can be stored and shown: one definition of "storable", used at every boundary."""

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

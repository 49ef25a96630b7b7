"""What the full-text index holds, and the FTS5 query built from a search.

SQLite's FTS5 tokenizers do not fit Chinese: ``unicode61`` keeps a whole run of Chinese
characters as one token (``东京的咖啡`` is one word), and ``trigram`` cannot match a query
shorter than three characters, yet most Chinese words have two (东京, 咖啡). So the text is
tokenised here, with the tokenizer tool selection uses
(:func:`miniagent.core.runtime.selection.tokenize`): lower-cased English words with common endings
cut and stop words dropped, and each run of Chinese or Japanese characters as its single
characters and its overlapping pairs. The terms are stored space-separated and FTS5 indexes
them with ``unicode61``, which keeps each term whole. A query goes through the same tokenizer;
every term is quoted and the terms are joined with ``OR``, so that nothing a person or a model
types (quotes, ``AND``/``OR``/``NEAR``, ``*``, ``^``, parentheses, ``-``, ``col:``) is read as
FTS5 syntax. BM25 then ranks documents that share more, and rarer, terms first: a document
with the pair 东京 also has 东 and 京, and outranks one with only 京.

The index depends on the tokenizer, so a file records a fingerprint of it
(:func:`fingerprint`); a file indexed by a different tokenizer is reindexed when it is opened.

The tokenizer is imported where it is used, not at module level: :mod:`miniagent.core.runtime`
sits above this package (the step logic recalls memories), and must be able to import it.

Example:
    >>> index_terms("The user lives in 东京")
    'user live 东 京 东京'
    >>> match_query('coffee" OR "x* AND (tea) -milk NEAR/2')
    '"coffee" OR "x" OR "tea" OR "milk" OR "near" OR "2"'
    >>> match_query("what is the") is None
    True
"""

from __future__ import annotations

import functools
import hashlib

__all__ = ["MAX_QUERY_TERMS", "fingerprint", "index_terms", "match_query"]

MAX_QUERY_TERMS = 64
"""The most distinct terms a query keeps (words and pairs first, then single characters):
an ``OR`` of thousands of terms, from a long Chinese paragraph, would match everything."""

_PROBE = ("Planning meetings, running tests and the cities' getCityForecast of café № 42 log10; "
          "我的东京咖啡是在北京买的。ひらがなカタカナ")


def _tokenize(text: str) -> list[str]:
    from miniagent.core.runtime.selection import tokenize

    return tokenize(text)


def index_terms(text: str) -> str:
    """What FTS5 indexes for ``text``: its terms, space-separated."""
    return " ".join(_tokenize(text))


def match_query(query: str) -> str | None:
    """An FTS5 ``MATCH`` expression for ``query``, or ``None`` when it has no terms."""
    distinct = list(dict.fromkeys(_tokenize(query)))
    if len(distinct) > MAX_QUERY_TERMS:
        longer = [t for t in distinct if len(t) > 1]
        distinct = (longer + [t for t in distinct if len(t) == 1])[:MAX_QUERY_TERMS]
    if not distinct:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in distinct)


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """A digest of what the tokenizer makes of a probe text: it changes when the tokenizer
    does (its stemming, stop words or Chinese handling)."""
    return hashlib.sha256(index_terms(_PROBE).encode()).hexdigest()[:16]

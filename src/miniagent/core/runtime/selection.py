"""Tool selection: each model request offers only the tools relevant to the conversation.

Past a dozen tools a model picks worse and every request carries every schema. With
``Agent(aids=Aids(tool_selection=K))`` the step logic asks :func:`select_tools` before it renders a
request: the tools are ranked by Okapi BM25 over their names, descriptions and parameter names
(and parameter descriptions), the query being what the user and the model have written so far
(tool results are left out: they are data, often long, and may carry text a tool's author did
not write). The request offers the ``K`` best, plus every tool the run has already called,
in registration order, so the prompt stays the same while the choice does not change. When
fewer than ``K`` tools match, the rest of the ``K`` places go to the tools the previous request
offered, then to the first tools registered: a lexical index misses paraphrases, and a model
given a few more tools can still find the right one. With strict selection
(``Aids(strict_selection=True)``, on for a small model, which picks a wrong tool more readily
than it misses a right one) they do not: only matching tools are offered, none when nothing
matches.

Tokens are lower-cased words split at ``snake_case`` and ``camelCase`` boundaries, with common
English endings (plural, ``-ing``, ``-ed``, ``-er``) cut, and without numbers (``10`` in a
question is a value; it matched ``log10`` in a calculator's description: a word of letters and
digits gives itself and its letters); the memory index, which shares this tokenizer, keeps the
numbers. A run of Chinese or Japanese characters gives its single characters and its
overlapping pairs, which match words of one or two characters without a word segmenter.

Nothing here reads a clock or draws a random number: the same history and tools give the same
choice, which the step logic records in the step (:attr:`~miniagent.core.types.Step.offered_tools`).
A registered tool that was not offered still validates and runs when the model calls it (the
registry is the allow-list, the selection only keeps the prompt short); it then counts as used
and is offered from the next request on.

When the offer changes between two requests, the tools' part of the prompt changes with it, so
a server cannot reuse its prefix cache across that step (the history itself stays append-only).
Offering the same set in the same order while the evidence does not change keeps that rare.

BM25 is written out here (some forty lines) rather than taken from ``rank-bm25`` or ``bm25s``:
both need numpy (``bm25s`` scipy too), which miniagent's core does not depend on, and an index
of a few dozen short tool descriptions needs no matrices.

Example:
    >>> from miniagent.core.tools.toolbox import tool
    >>> @tool
    ... def get_weather(city: str) -> str:
    ...     '''Current weather of a city.'''
    ...     return "sunny"
    >>> @tool
    ... def convert_currency(amount: float, to: str) -> str:
    ...     '''Convert money between currencies.'''
    ...     return "1"
    >>> from miniagent.core.types import Message
    >>> chosen = select_tools([get_weather, convert_currency], 1,
    ...                       [Message(role="user", content="What is the weather in Paris?")])
    >>> [t.name for t in chosen]
    ['get_weather']
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from miniagent.core.types import Message, Step, ToolLike

__all__ = ["ToolIndex", "hints", "offer", "offered_only", "select_tools", "tokenize",
           "used_tools"]

K1, B = 1.2, 0.75
"""The usual Okapi BM25 constants (term saturation, length normalisation)."""

# Patterns as text: ``re`` compiles them on a selection's first use and caches them (compiling
# these Unicode classes at import cost more than anything else here, for agents that select
# no tools).
_WORD = r"[^\W_]+"
_LETTERS = r"[^\W\d_]+"
_DIGITS = r"\d+"
_CAMEL = r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])"
_CJK = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "into", "is", "it", "me", "my", "of", "on", "or", "please", "that", "the", "this",
    "to", "use", "what", "when", "where", "which", "who", "will", "with", "you", "your",
    "many", "much", "there", "have", "has",
    # conversational verbs: "How do you say 'thank you' in French?" matched read_file's "says
    # where it stopped", and the 1.5B model then read every file it could find
    "say", "says", "said", "tell", "tells"})
_CJK_STOP = frozenset("的了是吗呢吧啊我你请把在和与")


def tokenize(text: str, *, numbers: bool = True) -> list[str]:
    """The index terms of ``text``; without ``numbers``, numbers are left out (tool selection:
    ``10`` in a question is a value, not what a tool is about), and the memory index keeps
    them (a code, a year).

    Example:
        >>> tokenize("getCityForecast for the cities")
        ['get', 'city', 'forecast', 'city']
        >>> tokenize("北京天气")
        ['北', '京', '天', '气', '北京', '京天', '天气']
    """
    terms: list[str] = []
    for part in re.split(_CJK, re.sub(_CAMEL, " ", text)):
        terms.extend(_latin_terms(part, numbers))
    for run in re.findall(_CJK, text):
        terms.extend(_cjk_terms(run))
    return terms


def _latin_terms(text: str, numbers: bool) -> Iterable[str]:
    for word in re.findall(_WORD, text):
        word = word.lower()
        if word in _STOP or (word.isdigit() and not numbers):
            continue
        letters = re.findall(_LETTERS, word)
        if letters == [word]:
            yield _stem(word)
            continue
        if letters:  # sha256, ipv6: the whole word tells tools apart, its letters match a
            yield word  # text that names only them (log10 and "log")
        yield from (_stem(part) for part in letters if part not in _STOP)
        if numbers:
            yield from re.findall(_DIGITS, word)


def _stem(word: str) -> str:
    """A light suffix stemmer (plural, -ing, -ed, -er), the same for tools and questions:
    ``reminders`` and ``remind``, ``raining`` and ``rain`` meet."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[:-2].endswith(("ss", "x", "z", "ch", "sh")):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[:-len(suffix)]
            if len(word) > 4 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]  # planning -> plann -> plan
            break
    return word


def _cjk_terms(run: str) -> list[str]:
    singles = [ch for ch in run if ch not in _CJK_STOP]
    pairs = [run[i:i + 2] for i in range(len(run) - 1)]
    return singles + pairs


def tool_text(tool: ToolLike) -> str:
    """What a tool is indexed by: its name, description, parameter names and descriptions."""
    parts = [tool.name, tool.description or ""]
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    if isinstance(properties, dict):
        for name, schema in properties.items():
            parts.append(str(name))
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                parts.append(schema["description"])
    return " ".join(parts)


class ToolIndex:
    """A BM25 index of tools, built once per tool set.

    Args:
        tools: the tools, in the order they are offered.
    """

    def __init__(self, tools: Sequence[ToolLike]) -> None:
        self.tools = list(tools)
        docs = [Counter(tokenize(tool_text(t), numbers=False)) for t in self.tools]
        lengths = [sum(doc.values()) for doc in docs]
        average = (sum(lengths) / len(lengths)) if lengths else 0.0
        # each term's tools, with the term's BM25 weight in each (the query only adds them up)
        self._postings: dict[str, list[tuple[int, float]]] = {}
        for position, (doc, length) in enumerate(zip(docs, lengths)):
            norm = K1 * (1 - B + B * length / average) if average else K1
            for term, tf in doc.items():
                self._postings.setdefault(term, []).append(
                    (position, tf * (K1 + 1) / (tf + norm)))
        count = len(docs)
        for term, postings in self._postings.items():
            # the non-negative idf variant: a term in most tools still counts a little
            idf = math.log(1 + (count - len(postings) + 0.5) / (len(postings) + 0.5))
            self._postings[term] = [(position, idf * weight) for position, weight in postings]

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every tool for ``query``, in tool order."""
        totals = [0.0] * len(self.tools)
        for term, times in Counter(tokenize(query, numbers=False)).items():
            for position, weight in self._postings.get(term, ()):
                totals[position] += times * weight
        return totals

    def top(self, query: str, k: int, preferred: Iterable[str] = ()) -> list[int]:
        """Positions of the ``k`` best tools for ``query``; among equal scores (no match at all,
        say) the ``preferred`` names first, then the earlier tool."""
        scores, first = self.scores(query), set(preferred)
        ranked = sorted(range(len(scores)),
                        key=lambda i: (-scores[i], self.tools[i].name not in first, i))
        return ranked[:k]


_INDEXES: OrderedDict[tuple[Any, ...], ToolIndex] = OrderedDict()
_CACHE_SIZE = 16


def index_for(tools: Sequence[ToolLike]) -> ToolIndex:
    """The index of this tool set, built once and kept for the next requests (a bounded cache
    keyed by the tools' names and the identity of their schemas; an entry keeps them alive)."""
    key = tuple((t.name, id(t.parameters), t.description) for t in tools)
    index = _INDEXES.get(key)
    # runs on other threads share the cache: another may evict a key between two of these
    # calls, which only costs a rebuild (each call is atomic; no lock in the step logic)
    with contextlib.suppress(KeyError):
        if index is None:
            index = _INDEXES[key] = ToolIndex(tools)
            while len(_INDEXES) > _CACHE_SIZE:
                _INDEXES.popitem(last=False)
        else:
            _INDEXES.move_to_end(key)
    assert index is not None
    return index


def conversation_text(messages: Sequence[Message]) -> str:
    """The query: what the user and the model wrote (tool results left out), with the words
    of what that text looks like (see :func:`hints`): the model's own thought counts too
    ("now I subtract them" brings the calculator to the next request)."""
    texts = [m.content for m in messages
             if m.role in ("user", "assistant") and isinstance(m.content, str)]
    shape = hints(" ".join(texts))
    return "\n".join([*texts, shape] if shape else texts)


# What a question looks like, and the words tools that handle it are described with: numbers
# are left out of the query, so "17 * 23" alone would match no calculator, and "add up the
# counts" matched the line counter (its "count"), not the calculator.
_SHAPES = (
    (r"\d[\d.,]*\s*(?:[-+*/×÷^%]|\*\*)\s*\(?\s*\d|\b(?:sqrt|log|sin|cos)\s*\(|"
     r"\d\s*(?:plus|minus|times|divided by|squared)\b|"
     r"\b(?:add(?:ed|ing)? (?:up|together|them)|sum|total|combined|subtract\w*|difference|"
     r"multipl\w*|divid\w*|quarter of|half of|average|percentage)\b|"
     r"\bhow (?:many|much)\b[^?.!]{0,60}\b(?:more|less|fewer|warmer|colder|hotter|higher|"
     r"lower|older|younger|bigger|smaller|larger|longer|shorter|heavier|lighter)\b"
     r"[^?.!]{0,40}\bthan\b",
     "arithmetic expression calculate calculator math evaluate"),
    (r"\b[\w-]+\.(?:txt|csv|tsv|json|jsonl|md|log|py|yaml|yml|toml|ini|xml|html|pdf|docx?)\b",
     "file path"),
    (r"\d\s*(?:km|kilomet\w*|mi|miles?|kg|kilogram\w*|lbs?|pounds? of|°\s*[CF]|celsius|"
     r"fahrenheit|met(?:er|re)s?|feet|foot|ft|inch(?:es)?|cm|mm|lit(?:er|re)s?|gallons?|"
     r"ounces?|oz|mph|km/h)\b", "unit convert conversion"),
    (r"[$€£¥]\s*\d|\d\s*(?:euros?|dollars?|usd|eur|gbp|jpy|cny|yen|yuan|rmb|pounds?)\b|"
     r"\b(?:exchange rate|currenc\w*)\b", "currency convert money exchange rate"),
    (r"\b(?:stock|share price|ticker|shares)\b|\$[A-Z]{1,5}\b",
     "stock price ticker share market quote"),
    (r"\b(?:what time|time is it|today's date|what day|timezone|time zone)\b",
     "time current date timezone clock"),
    (r"\b(?:rain\w*|snow\w*|sunny|forecast|temperature|humid\w*|windy|cloudy|warm\w*|"
     r"cold\w*|hot|umbrella|degrees)\b",
     "weather temperature forecast condition"),
)

# Chinese words of common tasks, with the English words tools are usually described with:
# a question in Chinese then finds a tool whose description is in English.
_GLOSSARY = {
    "天气": "weather", "气温": "temperature weather", "温度": "temperature weather",
    "下雨": "rain weather", "下雪": "snow weather", "预报": "forecast weather",
    "计算": "calculate arithmetic expression calculator", "等于": "calculate arithmetic",
    "乘以": "multiply arithmetic", "除以": "divide arithmetic", "平方根": "sqrt arithmetic",
    "加起来": "add sum arithmetic", "一共": "total sum arithmetic",
    "相差": "difference subtract arithmetic",
    "文件": "file", "行": "line file", "读": "read file", "目录": "list files directory",
    "时间": "time current", "几点": "time current", "日期": "date time current",
    "汇率": "currency exchange rate", "美元": "currency dollar usd", "欧元": "currency euro eur",
    "人民币": "currency yuan cny", "日元": "currency yen jpy", "英镑": "currency pound gbp",
    "换算": "convert", "转换": "convert", "兑换": "convert currency",
    "股价": "stock price ticker", "股票": "stock price ticker",
    "公里": "km kilometer unit", "英里": "mile unit", "公斤": "kg kilogram unit",
    "首都": "capital country", "国家": "country", "人口": "population country",
    "记住": "remember memory", "记得": "recall memory", "搜索": "search", "查找": "search find",
    "邮件": "email mail send", "发送": "send", "付款": "pay payment", "支付": "pay payment",
}


def hints(text: str) -> str:
    """Words for what ``text`` looks like: an arithmetic expression, a file name, a quantity
    with a unit, money, a stock ticker, the time, the weather; and the English words of the
    Chinese words it holds (see ``_GLOSSARY``). Bounded: only the first 2,000 characters."""
    text = text[:2000]
    words = [terms for pattern, terms in _SHAPES if re.search(pattern, text, re.IGNORECASE)]
    words += [terms for word, terms in _GLOSSARY.items() if word in text]
    return " ".join(words)


def used_tools(messages: Sequence[Message]) -> set[str]:
    """Names of the tools the model has called in this history."""
    return {call.name for m in messages for call in m.tool_calls if isinstance(call.name, str)}


def select_tools(tools: Sequence[ToolLike], k: int, messages: Sequence[Message],
                 previous: Sequence[str] | None = None, *, strict: bool = False
                 ) -> list[ToolLike]:
    """The tools to offer for the next request of this history.

    Args:
        tools: every tool of the run, in registration order.
        k: how many tools to choose by relevance.
        messages: the history so far.
        previous: the names offered by the previous request: among tools the conversation
            matches equally (or not at all) these come first, so that the offer changes only
            when the evidence does (the first request then fills up with the first tools).
        strict: Offer only tools the conversation matches, none when nothing does, instead
            of filling the ``k`` places (a small model then answers a question no tool is
            about without being tempted to call one), the most relevant first.

    Returns:
        The ``k`` most relevant tools plus those already called, in registration order
        (strict: by relevance, then those called); every tool when there are no more than
        ``k`` (every matching one, when strict).
    """
    if len(tools) <= k and not strict:
        return list(tools)
    index, query = index_for(tools), conversation_text(messages)
    top, called = index.top(query, k, previous or ()), used_tools(messages)
    if strict:
        return _strict(tools, index.scores(query), top, called, previous or ())
    chosen = set(top)
    return [t for i, t in enumerate(tools) if i in chosen or t.name in called]


def _strict(tools: Sequence[ToolLike], scores: list[float], top: list[int], called: set[str],
            previous: Sequence[str]) -> list[ToolLike]:
    """The matching tools among ``top`` and those called: those the previous request offered
    first, in its order (the prompt stays the same while the choice does), then the others
    best first (a worked example shows the first tool)."""
    keep = {i for i in top if scores[i] > 0} | {i for i, t in enumerate(tools) if t.name in called}
    where = {t.name: i for i, t in enumerate(tools)}
    first = [where[name] for name in previous if where.get(name) in keep]
    rest = [i for i in top if i in keep and i not in first]
    rest += sorted(keep - set(first) - set(rest))
    return [tools[i] for i in first + rest]


def offer(tools: Sequence[ToolLike], k: int | None, messages: Sequence[Message],
          steps: Sequence[Step], *, pinned: str | None = None, strict: bool = False
          ) -> tuple[list[ToolLike], list[str] | None]:
    """What the step logic offers the next request, and the names to record in its step
    (``None`` when there is no selection: every tool is offered). A ``pinned`` tool (the one
    ``tool_choice`` names) is always among them; ``strict``: see :func:`select_tools` (with
    ``k`` None, every tool the conversation matches)."""
    if k is None and not strict:
        return list(tools), None
    k = len(tools) if k is None else k  # strict alone: every matching tool
    previous = steps[-1].offered_tools if steps else None
    chosen = select_tools(tools, k, messages, previous, strict=strict)
    if pinned is not None and all(t.name != pinned for t in chosen):
        chosen = [t for t in tools if t in chosen or t.name == pinned]
    return chosen, [t.name for t in chosen]


def offered_only(tools: Sequence[ToolLike], offered: Sequence[str] | None) -> list[ToolLike]:
    """The tools a step offered (all of them without a selection): a format error names these,
    not every tool, so that the query of the next request does not name every tool either."""
    if offered is None:
        return list(tools)
    names = set(offered)
    return [t for t in tools if t.name in names]

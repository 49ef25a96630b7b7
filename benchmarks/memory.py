"""Long-term memory: add and search latency at 10k and 100k items, recall@5 on paraphrased
questions in English and Chinese, and what the recall block costs in tokens per turn.

The questions are in ``benchmarks/data/memory_recall.json``: 20 facts a user might tell an
assistant and 20 questions asking for them in other words, in English, and the same in
Chinese (written for this benchmark, not taken from a public set). Recall@5 is the share of
questions whose fact is among the 5 results of a search in its language's namespace: with the
facts alone, then with the facts among N generated distractor memories about the user's
relations (same vocabulary, same shape: "The user's neighbour, Lena, is allergic to pollen.",
"用户的邻居李娜对花粉过敏。"), half in each language.

Full text is FTS5 with BM25 alone; hybrid adds vectors from a cheap deterministic embedder
(hashed character trigrams, :mod:`miniagent.testing.embeddings`), fused by reciprocal rank. The
embedder knows no synonyms, so hybrid recall here says what the vector path costs, not what a
real embedding model would find; its latency is that of any embedder of the same length, minus
the embedding call itself.

Baselines, measured in the same run: a plain SQLite insert (one row, one transaction, the same
WAL settings, no index) for adds; a ``LIKE '%word%'`` scan of the items table (the search one
would write without an index) and full-text search for hybrid search. Latencies are medians.

Token cost: the recall block of the 5 results (:func:`miniagent.memory.recall_block`), in
tokens estimated by :func:`miniagent._internal.text.tokens` (ASCII 4 characters a token,
other characters one each), per question: what recall before each turn adds to the prompt.

Usage: python benchmarks/memory.py [--sizes 10000 100000] [--dimensions 64] [--samples 200]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from miniagent._internal.text import tokens
from miniagent.memory import Memory, recall_block
from miniagent.memory.terms import index_terms
from miniagent.memory.tools import RECALL_MAX_CHARS
from miniagent.testing.embeddings import trigram_embedder

DATA = json.loads((Path(__file__).parent / "data" / "memory_recall.json").read_text("utf-8"))
LANGUAGES = ("en", "zh")
K = 5

EN = {
    "who": ["colleague", "brother", "neighbour", "manager", "friend", "aunt", "cousin",
            "landlady", "trainer", "accountant", "son", "uncle", "teacher", "client", "partner"],
    "name": ["Omar", "Lena", "Raj", "Sofia", "Tom", "Mei", "Ivan", "Nora", "Diego", "Aiko",
             "Paul", "Zara", "Ben", "Yusuf", "Clara"],
    "does": ["likes hiking in {place}", "works at a bakery in {place}", "lives in {place}",
             "is allergic to {thing}", "bought {thing} last {day}", "visits {place} every {day}",
             "asked about {thing} on {day}", "prefers {thing} to coffee",
             "is learning to cook {thing}", "moved the meeting about {thing} to {day}",
             "forgot {thing} at the office", "needs {thing} before {day}"],
    "place": ["Lisbon", "Oslo", "Kyoto", "Denver", "Cairo", "Lyon", "Seoul", "Porto", "Austin",
              "Hamburg", "Nairobi", "Quebec"],
    "thing": ["cats", "shellfish", "a new laptop", "green tea", "the tax forms", "a bicycle",
              "pollen", "tickets for the opera", "the spare keys", "dumplings", "the printer",
              "a gym membership", "strawberries", "the project budget"],
    "day": ["Monday", "Tuesday", "Wednesday", "Friday", "Saturday", "week", "month", "spring"],
}
ZH = {
    "who": ["同事", "哥哥", "邻居", "经理", "朋友", "阿姨", "表妹", "房东太太", "教练", "会计",
            "儿子", "叔叔", "老师", "客户", "搭档"],
    "name": ["王磊", "李娜", "张伟", "陈静", "刘洋", "赵敏", "孙浩", "周婷", "吴军", "郑爽",
             "黄鹏", "林晓", "何欢", "高远", "罗琳"],
    "does": ["喜欢去{place}爬山", "在{place}的面包店工作", "住在{place}", "对{thing}过敏",
             "{day}买了{thing}", "每{day}都去{place}", "{day}问起了{thing}",
             "比起咖啡更喜欢{thing}", "正在学做{thing}", "把关于{thing}的会议改到了{day}",
             "把{thing}忘在了办公室", "{day}之前需要{thing}"],
    "place": ["里斯本", "奥斯陆", "京都", "丹佛", "开罗", "里昂", "首尔", "波尔图", "杭州",
              "汉堡", "内罗毕", "成都"],
    "thing": ["猫毛", "海鲜", "新笔记本电脑", "绿茶", "报税表", "自行车", "花粉", "歌剧票",
              "备用钥匙", "饺子", "打印机", "健身卡", "草莓", "项目预算"],
    "day": ["周一", "周二", "周三", "周五", "周六", "周", "月", "春天"],
}


def distractors(count: int, seed: int = 7) -> Iterator[tuple[str, str]]:
    """``(namespace, text)`` of ``count`` generated memories, alternately English and Chinese."""
    rng = random.Random(seed)
    for i in range(count):
        words = EN if i % 2 == 0 else ZH
        does = rng.choice(words["does"]).format(place=rng.choice(words["place"]),
                                                thing=rng.choice(words["thing"]),
                                                day=rng.choice(words["day"]))
        who, name = rng.choice(words["who"]), rng.choice(words["name"])
        if i % 2 == 0:
            yield "en", f"The user's {who}, {name}, {does}."
        else:
            yield "zh", f"用户的{who}{name}{does}。"


def questions() -> list[tuple[str, str, str]]:
    """``(language, question, fact)`` of every question."""
    return [(language, question, DATA[language]["facts"][fact])
            for language in LANGUAGES for question, fact in DATA[language]["questions"]]


@dataclass
class Outcome:
    """One pass of every question through a memory's search."""

    ms: list[float] = field(default_factory=list)
    hits: dict[str, list[bool]] = field(default_factory=lambda: {lang: [] for lang in LANGUAGES})
    block: dict[str, list[int]] = field(default_factory=lambda: {lang: [] for lang in LANGUAGES})

    def recall(self) -> str:
        every = [hit for hits in self.hits.values() for hit in hits]
        parts = [f"{sum(h)}/{len(h)} {language}" for language, h in self.hits.items()]
        return f"{sum(every) / len(every):.2f} ({', '.join(parts)})"

    def tokens(self) -> str:
        return "; ".join(f"{language} mean {statistics.mean(v):.0f}, max {max(v)}"
                         for language, v in self.block.items())


def evaluate(memory: Memory, repeats: int = 1) -> Outcome:
    """Search every question in its language's namespace: time (the median of ``repeats``),
    whether its fact is among the results, the tokens of their recall block."""
    outcome = Outcome()
    for language, question, fact in questions():
        spent = []
        for _ in range(repeats):
            started = time.perf_counter()
            found = memory.search(question, k=K, namespace=language)
            spent.append(time.perf_counter() - started)
        outcome.ms.append(statistics.median(spent) * 1000)
        outcome.hits[language].append(fact in [item.text for item in found])
        outcome.block[language].append(tokens(recall_block(found)))
    return outcome


def fill(memory: Memory, size: int) -> float:
    """Add the facts, then distractors up to ``size`` items; µs per add."""
    started = time.perf_counter()
    for language in LANGUAGES:
        for fact in DATA[language]["facts"]:
            memory.add(fact, namespace=language)
    for namespace, text in distractors(max(0, size - 2 * len(DATA["en"]["facts"]))):
        memory.add(text, namespace=namespace)
    return (time.perf_counter() - started) / max(size, 1) * 1e6


def plain_inserts(folder: Path, rows: list[str]) -> float:
    """µs per plain SQLite insert: one row, one transaction, WAL, no index (the floor)."""
    db = sqlite3.connect(folder / "plain.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    started = time.perf_counter()
    for text in rows:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO items (text) VALUES (?)", (text,))
        db.execute("COMMIT")
    spent = time.perf_counter() - started
    db.close()
    return spent / len(rows) * 1e6


def like_scan_ms(path: Path) -> float:
    """The search one would write without an index: every item whose text holds the
    question's longest term (``LIKE``, a scan of the table), unranked; median ms."""
    db = sqlite3.connect(path)
    spent = []
    for language, question, _ in questions():
        word = max(index_terms(question).split() or [question], key=len)
        started = time.perf_counter()
        db.execute("SELECT id FROM memory_items WHERE namespace = ? AND text LIKE ?",
                   (language, f"%{word}%")).fetchall()
        spent.append(time.perf_counter() - started)
    db.close()
    return statistics.median(spent) * 1000


def measure(size: int, dimensions: int, samples: int) -> None:
    embed = trigram_embedder(dimensions)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.db"
        with Memory(path, embed=embed) as memory:
            filled = fill(memory, size)
        extra = [text for _, text in distractors(samples, seed=99)]
        plain = plain_inserts(Path(folder), extra)
        with Memory(path) as lexical, Memory(path, embed=embed) as hybrid:
            fts_add = _adds(lexical, extra)
            vector_add = _adds(hybrid, extra)
            scan = like_scan_ms(path)
            fts, both = evaluate(lexical, repeats=3), evaluate(hybrid)
        fts_ms, both_ms = statistics.median(fts.ms), statistics.median(both.ms)
        print(f"\n{size:,} items ({dimensions}-dimension vectors); filling: "
              f"{filled:.0f} µs per add with vectors")
        print(f"  add      plain insert {plain:6.0f} µs | full text {fts_add:6.0f} µs "
              f"({fts_add / plain:4.1f}x) | with vector {vector_add:6.0f} µs "
              f"({vector_add / plain:4.1f}x)")
        print(f"  search   LIKE scan {scan:7.1f} ms | full text {fts_ms:7.1f} ms "
              f"({fts_ms / scan:4.2f}x; slowest {max(fts.ms):.0f} ms) | hybrid {both_ms:7.1f} ms "
              f"({both_ms / fts_ms:4.1f}x full text)")
        print(f"  recall@{K} full text {fts.recall()} | hybrid {both.recall()}")
        print(f"  recall block (full text): {fts.tokens()} tokens per turn")


def _adds(memory: Memory, texts: list[str]) -> float:
    """µs per add of ``texts`` (in a namespace of their own, cleared after)."""
    started = time.perf_counter()
    for text in texts:
        memory.add(text, namespace="bench")
    spent = time.perf_counter() - started
    memory.clear("bench")
    return spent / len(texts) * 1e6


def alone(dimensions: int) -> None:
    """The facts alone: recall and the recall block's cost without distractors."""
    with Memory() as lexical, Memory(embed=trigram_embedder(dimensions)) as hybrid:
        for memory in (lexical, hybrid):
            fill(memory, 0)
        fts, both = evaluate(lexical), evaluate(hybrid)
    print(f"facts alone ({len(questions())} questions, 20 facts per language): "
          f"recall@{K} full text {fts.recall()} | hybrid {both.recall()}")
    print(f"  recall block (k={K}): {fts.tokens()} tokens per turn; an empty block is "
          f"{tokens(recall_block([]))}, a full one at most {RECALL_MAX_CHARS:,} characters "
          f"(~{RECALL_MAX_CHARS // 4} tokens of English, up to {RECALL_MAX_CHARS:,} of Chinese)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dimensions", type=int, default=64)
    parser.add_argument("--samples", type=int, default=200, help="adds timed at each size")
    args = parser.parse_args()
    alone(args.dimensions)
    for size in args.sizes:
        measure(size, args.dimensions, args.samples)


if __name__ == "__main__":
    main()

"""The inbox's list pages over a SQLite store of 100,000 sessions: server time per page.

Fills a store (in a temporary folder) with ``--sessions`` sessions, each saved as a real
session's JSON (a question, two steps, a waiting call, token usage), then calls the inbox's
ASGI application directly (no network, no client: the time is the server's, from the request
to the last byte of the page) for:

- the first page of ``/sessions`` (newest first), a page deep in the listing (keyset
  ``after``), a status filter, a text filter matching few sessions (it reads on until the page
  is full or the table ends), and the inbox ``/`` (waiting sessions, each loaded whole);

and prints each page's median time against baselines measured in the same run on the same
file: the bare ``SELECT`` of the same page (the floor: what reading the rows costs), and the
same ``SELECT`` with the indexes forbidden (``NOT INDEXED``: what a listing that sorts the
table costs).

With ``--by-size``, it measures instead whether a listing costs more when the sessions are
larger: ``/sessions`` over 50 small sessions, then over 50 sessions of 1 MB each (the same
sessions, each with 1 MB of metadata), and prints the ratio (1.0: the size costs nothing).

A script, not a test: it prints figures and asserts nothing.

Usage: python benchmarks/ui_list.py [--sessions 100000] [--repeats 15] [--by-size]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from miniagent import Agent, ScriptedModel, SQLiteStore, tool
from miniagent.core.types import ModelResponse, TokenUsage
from miniagent.ui import app

STATUSES = ["completed"] * 6 + ["awaiting_approval", "error", "cancelled", "max_steps"]


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone.

    Args:
        to: who is paid
        amount: how much
    """
    return f"paid {amount} to {to}"


def template(folder: Path) -> dict[str, Any]:
    """A real session's saved form: two steps, the second waiting for approval."""
    usage = TokenUsage(prompt_tokens=900, completion_tokens=40)
    script = [ModelResponse(content='Thought: look\nAction: pay\nAction Input: {"to": "Bob", '
                            '"amount": 1}', usage=usage)]
    store = SQLiteStore(folder / "template.db")
    result = Agent(model=ScriptedModel(script), tools=[pay], store=store).run("Pay Bob 1 euro")
    data: dict[str, Any] = store.load(result.session_id).to_dict()
    store.close()
    return data


def fill(path: Path, count: int, data: dict[str, Any]) -> None:
    SQLiteStore(path).close()  # the schema and its indexes
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    rows = []
    for n in range(count):
        status = STATUSES[n % len(STATUSES)]
        question = f"Pay supplier {n} for order {n * 7 % 1000}" + (" 急" if n % 5000 == 0 else "")
        at = 1_700_000_000.0 + n * 3.7
        data.update(id=f"sess{n:08d}", status=status, question=question, created_at=at,
                    updated_at=at)
        data["turns"][0]["question"] = question
        rows.append((data["id"], status, question, 2, at, at,
                     json.dumps(data, ensure_ascii=False, separators=(",", ":"))))
        if len(rows) == 5000:
            db.executemany("INSERT INTO sessions (id, status, question, steps, created_at, "
                           "updated_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            rows.clear()
    db.executemany("INSERT INTO sessions (id, status, question, steps, created_at, updated_at, "
                   "data) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'revisions'").fetchone():
        # what a save writes beside the row (a store of this version)
        tokens = TokenUsage(**data["usage"]).counted_tokens
        db.execute("INSERT INTO revisions (session_id, revision, tokens) SELECT id, 1, ? "
                   "FROM sessions", (tokens,))
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


async def render(inbox: Any, path: str, query: str = "") -> float:
    """Seconds the application takes to answer GET ``path?query`` (to its last byte)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": query.encode(),
             "headers": [(b"host", b"127.0.0.1:8321")], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 8321)}
    status: list[int] = []
    size = [0]

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        else:
            size[0] += len(message.get("body", b""))

    start = time.perf_counter()
    await inbox(scope, receive, send)
    elapsed = time.perf_counter() - start
    assert status == [200] and size[0] > 1000, (path, query, status, size)
    return elapsed


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(run: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return median_ms(samples)


def by_size(repeats: int) -> None:
    """``/sessions`` over 50 small sessions and over 50 of 1 MB each: the ratio of the times."""
    with tempfile.TemporaryDirectory() as folder:
        data = template(Path(folder))
        times = {}
        for label, padding in (("small", 0), ("1 MB", 1_000_000)):
            path = Path(folder) / f"{padding}.db"
            fill(path, 50, {**data, "metadata": {"padding": "x" * padding}})
            store = SQLiteStore(path)
            inbox = app(store=store)
            times[label] = median_ms([asyncio.run(render(inbox, "/sessions"))
                                      for _ in range(repeats)])
            print(f"/sessions over 50 sessions of {label:>5} ({path.stat().st_size / 1e6:6.1f} "
                  f"MB of store): {times[label]:8.2f} ms (median of {repeats})")
            store.close()
        print(f"ratio, 1 MB sessions to small ones: {times['1 MB'] / times['small']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--by-size", action="store_true",
                        help="compare a listing of 50 small sessions with one of 50 of 1 MB")
    args = parser.parse_args()
    if args.by_size:
        by_size(args.repeats)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sessions.db"
        start = time.perf_counter()
        fill(path, args.sessions, template(Path(folder)))
        size = path.stat().st_size / 1e6
        print(f"{args.sessions:,} sessions in SQLite ({size:,.0f} MB), filled in "
              f"{time.perf_counter() - start:.1f} s; median of {args.repeats} runs each\n")
        store = SQLiteStore(path)
        inbox = app(store=store)
        deep = 1_700_000_000.0 + (args.sessions // 3) * 3.7
        pages = [
            ("/sessions (first page)", "/sessions", "", ""),
            ("/sessions deep (after)", "/sessions", f"after={deep!r}~sess{args.sessions // 3:08d}",
             f"WHERE (updated_at, id) < ({deep!r}, 'sess{args.sessions // 3:08d}')"),
            ("/sessions?status=error", "/sessions", "status=error", "WHERE status = 'error'"),
            ("/sessions?q=急 (rare text)", "/sessions", "q=%E6%80%A5",
             "WHERE question LIKE '%急%'"),
            ("/ (inbox: 50 loaded)", "/", "", "WHERE status = 'awaiting_approval'"),
        ]
        db = sqlite3.connect(path)
        print(f"{'page':30} {'server ms':>10} {'bare SELECT':>12} {'ratio':>6} "
              f"{'no index ms':>12}")
        for label, route, query, where in pages:
            order = "ASC" if route == "/" else "DESC"
            select = (f"SELECT id, status, steps, question, created_at, updated_at FROM "
                      f"sessions {{}} {where} ORDER BY updated_at {order}, id {order} LIMIT 50")
            bare = timed(lambda s=select: db.execute(s.format("")).fetchall(), args.repeats)
            unindexed = timed(lambda s=select: db.execute(s.format("NOT INDEXED")).fetchall(),
                              max(3, args.repeats // 5))
            server = median_ms([asyncio.run(render(inbox, route, query))
                                for _ in range(args.repeats)])
            print(f"{label:30} {server:10.2f} {bare:12.2f} {server / bare:6.1f} "
                  f"{unindexed:12.2f}")
        db.close()
        store.close()
    print("\nserver ms: the inbox's time for the whole page; bare SELECT: the same 50 rows "
          "read with sqlite3 (the floor); no index: that SELECT with the indexes forbidden.")


if __name__ == "__main__":
    main()

"""A trace file followed as it grows (the inbox's ``--trace``): each read parses only the
lines appended since the last, waits for a line's newline, and starts over on a file replaced
or cut shorter."""

from __future__ import annotations

import json
from pathlib import Path

from miniagent.observe.reader import TraceFollower, read_trace


def record(sid: str, kind: str = "run_started") -> str:
    return json.dumps({"kind": kind, "session_id": sid, "span_id": f"r-{sid}", "at": 1.0,
                       "question": sid})


def test_only_whole_appended_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(record("a") + "\n{broken\n" + record("b")[:20], encoding="utf-8")
    follower = TraceFollower(path)
    first = [r.session_id for r in follower.read().runs]
    with path.open("a", encoding="utf-8") as file:
        file.write(record("b")[20:] + "\n")
    trace = follower.read()
    assert first == ["a"]  # b's line had no newline yet
    assert [r.session_id for r in trace.runs] == ["a", "b"] and trace.skipped == [2]
    assert trace.skipped == read_trace(path).skipped  # the same line numbers as one read


def test_a_file_cut_shorter_or_replaced_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(record("a") + "\n" + record("b") + "\n", encoding="utf-8")
    follower = TraceFollower(path)
    follower.read()
    path.write_text(record("c") + "\n", encoding="utf-8")  # cut shorter
    shorter = [r.session_id for r in follower.read().runs]
    other = tmp_path / "u.jsonl"
    other.write_text(record("d") + "\n" + record("e") + "\n" + record("f") + "\n",
                     encoding="utf-8")
    other.replace(path)  # another file in its place, longer
    assert shorter == ["c"]
    assert [r.session_id for r in follower.read().runs] == ["d", "e", "f"]

"""Guards: truncation notice, repeated-action keys, deadline."""

from __future__ import annotations

from miniagent.runtime.guards import LoopDetector, action_key, truncate_observation
from miniagent.types import ToolCall


def call(name: str, args: dict[str, object] | None = None, raw: str = "") -> ToolCall:
    return ToolCall(id="x", name=name, arguments=args or {}, raw_arguments=raw)


def test_truncation_notice_counts_removed_and_total() -> None:
    text = "x" * 4620
    out = truncate_observation(text, 1500)
    assert out == "x" * 1500 + "\n... [truncated 3,120 of 4,620 chars]"
    assert truncate_observation("short", 1500) == "short"
    assert truncate_observation(text, 0) == text


def test_action_key_normalises_case_spacing_order_and_numbers() -> None:
    a = action_key(call("search", {"q": "Paris  weather", "n": 2}))
    b = action_key(call("search", {"n": 2.0, "q": " paris weather"}))
    assert a == b
    assert a != action_key(call("search", {"q": "London weather", "n": 2}))
    assert a != action_key(call("lookup", {"q": "Paris weather", "n": 2}))
    assert action_key(call("s", raw="Paris")) == action_key(call("s", raw=" paris "))


def test_loop_detector_verdicts() -> None:
    detector = LoopDetector(limit=3)
    c = call("add", {"a": 1})
    assert [detector.check(c) for _ in range(4)] == ["ok", "ok", "intervene", "stop"]
    assert detector.check(call("add", {"a": 2})) == "ok"
    assert LoopDetector(limit=0).check(c) == "ok"

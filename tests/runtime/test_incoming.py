"""What the step logic keeps of a reply's metadata: made storable whatever its values are."""

from __future__ import annotations

from miniagent.runtime import incoming
from miniagent.types import ModelResponse, TokenUsage


def reply(raw: dict) -> ModelResponse:
    return ModelResponse(content="ok", usage=TokenUsage(), raw=raw)


def test_metadata_with_a_lone_surrogate_is_kept_replaced() -> None:
    kept = incoming.response(reply({"id": "r\ud800", "usage": {"note\udfff": [1, "x"]},
                                    "choices": [{"index": 0}]}))
    assert kept.raw == {"id": "r\ufffd", "usage": {"note\ufffd": [1, "x"]},
                        "choices": [{"index": 0}]}


def test_clean_metadata_is_kept_as_it_is() -> None:
    raw = {"id": "r1", "created": 0, "usage": {"n": 1.5, "ok": True, "none": None},
           "choices": []}
    original = reply(raw)
    assert incoming.response(original) is original


def test_metadata_json_cannot_write_is_still_checked() -> None:
    """A value JSON has no form for (a caller's own model may put one there) is walked."""
    odd = {"id": "r1", "tags": {"a"}, "pair": ("x", "y\ud800"), "choices": []}
    kept = incoming.response(reply(odd))
    assert kept.raw["pair"] == ["x", "y\ufffd"] and kept.raw["tags"] == "{'a'}"
    clean = reply({"id": "r1", "tags": {"a"}, "choices": []})
    assert incoming.response(clean) is clean

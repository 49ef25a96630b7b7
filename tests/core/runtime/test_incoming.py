"""What the step logic keeps of a reply's metadata: made storable whatever its values are."""

from __future__ import annotations

from miniagent.core.runtime.guards import admit_parsed, admit_response
from miniagent.core.types import ModelResponse, ParsedOutput, TokenUsage, ToolCall


def reply(raw: dict) -> ModelResponse:
    return ModelResponse(content="ok", usage=TokenUsage(), raw=raw)


def test_metadata_with_a_lone_surrogate_is_kept_replaced() -> None:
    kept = admit_response(reply({"id": "r\ud800", "usage": {"note\udfff": [1, "x"]},
                                    "choices": [{"index": 0}]}))
    assert kept.raw == {"id": "r\ufffd", "usage": {"note\ufffd": [1, "x"]},
                        "choices": [{"index": 0}]}


def test_clean_metadata_is_kept_as_it_is() -> None:
    raw = {"id": "r1", "created": 0, "usage": {"n": 1.5, "ok": True, "none": None},
           "choices": []}
    original = reply(raw)
    assert admit_response(original) is original


def test_metadata_json_cannot_write_is_still_checked() -> None:
    """A value JSON has no form for (a caller's own model may put one there) is walked."""
    odd = {"id": "r1", "tags": {"a"}, "pair": ("x", "y\ud800"), "choices": []}
    kept = admit_response(reply(odd))
    assert kept.raw["pair"] == ["x", "y\ufffd"] and kept.raw["tags"] == "{'a'}"
    clean = reply({"id": "r1", "tags": {"a"}, "choices": []})
    assert admit_response(clean) is clean


def test_a_surrogate_only_in_the_choices_leaves_the_reply_as_it_is() -> None:
    """The choices are the other fields' source, which are checked themselves."""
    original = reply({"id": "r1", "choices": [{"message": {"content": "\ud800"}}]})
    assert admit_response(original) is original
    odd = ModelResponse(content="a\ud800", reasoning_content="b", finish_reason="stop\udfff",
                        usage=TokenUsage(), raw={"choices": []})
    kept = admit_response(odd)
    assert (kept.content, kept.reasoning_content, kept.finish_reason) == (
        "a\ufffd", "b", "stop\ufffd")


def test_each_field_of_a_parsed_output_and_call_is_made_storable() -> None:
    clean = ToolCall(id="c1", name="echo", arguments={"v": ["x", {"k": 1}]}, raw_arguments="{}")
    bad = ToolCall(id="c\ud800", name="echo", arguments={"v\udfff": ["x\ud800"]},
                   raw_arguments="{\ud800")
    output = admit_parsed(ParsedOutput(kind="action", thought="t\ud800",
                                          text="ok", error=None, tool_calls=[clean, bad]))
    assert (output.thought, output.text, output.error) == ("t\ufffd", "ok", None)
    assert output.tool_calls[0] is clean
    assert output.tool_calls[1] == ToolCall(id="c\ufffd", name="echo",
                                            arguments={"v\ufffd": ["x\ufffd"]},
                                            raw_arguments="{\ufffd")
    same = ParsedOutput(kind="final", final_answer="fine", text="fine")
    assert admit_parsed(same) == ParsedOutput(kind="final", final_answer="fine",
                                                 text="fine")

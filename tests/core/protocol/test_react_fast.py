"""The ReAct parser's fast path gives exactly what the full parser gives, on every text.

Texts are built from the plain shapes (``Thought / Action / Action Input`` and ``Thought /
Final Answer``) with each part swapped, at random, for a near miss: fences, bold labels,
full-width colons, Chinese labels, numbered labels, trailing prose, a second action, JSON cut
off or not JSON, an invented Observation, names meaning no tool. Wherever the fast path answers,
its :class:`ParsedOutput` must equal the full parser's; where it does not, the full parser
alone answers.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from miniagent.core.protocol.react_parser import _fast, _parse_full, parse_react

PREFIXES = ["", "", "", "\n", "  ", "\n \t", "<think>plan</think>", "**", "> ", "```\n",
            "\r\n", "Here is my step.\n", "</think>"]
THOUGHT_LABELS = ["Thought: ", "Thought: ", "Thought:", "Thought:** ", "Thought:**",
                  "thought: ", "**Thought:** ", "Thought： ", "思考：", "Thought 1: ", "Thoughts: ",
                  "- Thought: ", "Thought:_", "Thought:*", ""]
THOUGHT_TEXTS = ["add first", "", "  ", "我需要计算 1+1", "use Action: add here", "**bold** idea",
                 "a\rb", "line one\nline two", "x\nAction: sub", "I know.\nFinal Answer: 3",
                 "see {\"a\": 1}", "then (maybe)", "Observation: none", "ends with **",
                 "\u3000wide space\u3000", "</think> closed"]
LINE_ENDS = ["\n", "\n", "\r\n", "\n\n", " \n", "  ", "\n> "]
ACTION_LABELS = ["Action: ", "Action: ", "Action:", "action: ", "**Action:** ", "**Action:**",
                 "Action： ", "行动：", "Action 1: ", "Action:  \t", "ACTION: ", "- Action: "]
NAMES = ["add", "add", "calc_2", "my-tool", "web_search", "final_answer", "Final_Answer",
         "FinalAnswer", "none", "None", "na", "nil", "__init__", "_private", "calc.", "`add`",
         "add()", "add(", "add (adds two numbers)", "search Final Answer:", "", "加法", "a.b",
         'add({"a": 1})', '{"action": "add", "action_input": {"a": 1}}']
INPUT_LABELS = ["Action Input: ", "Action Input: ", "Action Input:", "action input: ",
                "**Action Input:** ", "Action Input： ", "行动输入：", "Action Input 1: ",
                "Action_Input: ", "Input: ", "Action Input:\n", "Action Input:  "]
ARGS = ['{"a": 1, "b": 2}', '{"a": 1, "b": 2}', "{}", '{"q": "巴黎 天气"}',
        '{"text": "say \\"Observation: hi\\" {braces}"}', '{"a": [1, {"b": null}], "c": 1.5e3}',
        '{\n  "a": 1,\n  "b": "x"\n}', '{"a": 1', '{"a": "cut', "{'a': 1}", '{"a": 1,}',
        '{"a": 1}{"b": 2}', '```json\n{"a": 1}\n```', '`{"a": 1}`', '"{\\"a\\": 1}"', "[1, 2]",
        "Paris", '{"a": NaN, "b": -Infinity}', '{"a": "</think>"}', '{"deep": ' + "[" * 70
        + "]" * 70 + "}", '{"n": ' + "9" * 5000 + "}", '{"a": 1}\x0b', '{"a": "\\ud800"}',
        'add({"a": 1})', 'sub({"a": 1})', '{"a": "it\'s"}', '{"x": "\n"}']
TRAILS = ["", "", "", "\n", "  \n\t", "\nObservation: 3", "\nObservation:", " and more prose",
          "\nThought: again\nAction: add\nAction Input: {}", "\n```", "`", "\u3000", "\x0b",
          "\nFinal Answer: 4", "\n观察：3", "\nAction: sub", "Observation: mid-line"]
FINAL_LABELS = ["Final Answer: ", "Final Answer: ", "Final Answer:", "Final Answer:**",
                "Final Answer:** ", "final answer: ", "**Final Answer:** ", "Final Answer： ",
                "最终答案：", "Answer: ", "Final Answer 1: ", "Final_Answer: ", "Final Answer:_x"]
ANSWERS = ["6", "6", "Paris is the capital.", "", "  ", "巴黎。", "**6**", "6**", "**",
           "line one\nline two", "a\nAction: add\nAction Input: {}", "a\nAction Input: {}",
           "a\n行动：add", "a\nObservation: x", "a\nThought: more", "a\n**Action:** add",
           "see Action: add mid-line", '{"a": 1}', "x\nFinal Answer: y", "a\r\nb", "ends </think>"]


def _pick(options: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


def _free() -> st.SearchStrategy[str]:
    return st.text(alphabet=st.sampled_from(list("aA :：*_`{}[]\"'\n\r\t行动最终答案思考观察<>/")),
                   max_size=12)


def _part(draw: st.DrawFn, options: list[str]) -> str:
    """The plain piece (``options[0]``) five times in six; else a listed near miss, random
    characters, or a piece with random characters after it. Most texts so differ from a plain
    shape in one or two places, where the fast path must notice it."""
    if draw(st.integers(0, 5)):
        return options[0]
    return draw(st.one_of(_pick(options), _free(), st.tuples(_pick(options), _free())
                          .map("".join)))


@st.composite
def action_texts(draw: st.DrawFn) -> str:
    thought = (_part(draw, THOUGHT_LABELS) + _part(draw, THOUGHT_TEXTS)
               + _part(draw, LINE_ENDS))
    if not draw(st.integers(0, 3)):
        thought = ""
    return (_part(draw, PREFIXES) + thought + _part(draw, ACTION_LABELS) + _part(draw, NAMES)
            + _part(draw, LINE_ENDS) + _part(draw, INPUT_LABELS) + _part(draw, ARGS)
            + _part(draw, TRAILS))


@st.composite
def final_texts(draw: st.DrawFn) -> str:
    thought = (_part(draw, THOUGHT_LABELS) + _part(draw, THOUGHT_TEXTS)
               + _part(draw, LINE_ENDS))
    if not draw(st.integers(0, 3)):
        thought = ""
    return (_part(draw, PREFIXES) + thought + _part(draw, FINAL_LABELS) + _part(draw, ANSWERS)
            + _part(draw, TRAILS))


@st.composite
def well_formed(draw: st.DrawFn) -> str:
    """The plain shapes, each with a valid JSON object or a non-empty one-line answer."""
    thought = draw(st.text(alphabet=st.characters(blacklist_characters="\n\r*_<",
                                                  blacklist_categories=("Cs",)), max_size=30))
    head = f"Thought: {thought}\n" if draw(st.booleans()) else ""
    if draw(st.booleans()):
        args = draw(st.dictionaries(st.text(max_size=8), st.one_of(
            st.integers(), st.text(max_size=20), st.booleans(), st.none(),
            st.lists(st.integers(), max_size=3)), max_size=4))
        indent = draw(st.sampled_from([None, 2]))
        return head + "Action: add\nAction Input: " + json.dumps(args, ensure_ascii=False,
                                                                 indent=indent)
    answer = draw(st.text(alphabet=st.characters(blacklist_characters="\n\r*<",
                                                 blacklist_categories=("Cs",)), max_size=40))
    return head + "Final Answer: x" + answer


def _same(text: str) -> None:
    fast = _fast(text)
    if fast is not None:
        assert fast == _parse_full(text), text
    assert parse_react(text) == _parse_full(text), text


@settings(max_examples=600, deadline=None)
@given(action_texts())
def test_fast_path_equals_full_parser_on_actions_and_near_misses(text: str) -> None:
    _same(text)


@settings(max_examples=600, deadline=None)
@given(final_texts())
def test_fast_path_equals_full_parser_on_answers_and_near_misses(text: str) -> None:
    _same(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_fast_path_equals_full_parser_on_any_text(text: str) -> None:
    _same(text)


@settings(max_examples=300, deadline=None)
@given(well_formed())
def test_plain_shapes_take_the_fast_path(text: str) -> None:
    fast = _fast(text)
    assert fast is not None, text
    assert fast == _parse_full(text)
    assert fast.kind in ("action", "final")


def test_examples_of_each_side() -> None:
    action = 'Thought: add first\nAction: add\nAction Input: {"a": 1, "b": 2}\n'
    fast = _fast(action)
    assert fast is not None and fast.tool_calls[0].arguments == {"a": 1, "b": 2}
    assert fast.thought == "add first" and fast.text == action.strip()
    answer = "Thought: 我知道了\nFinal Answer: 巴黎\n是首都"
    fast = _fast(answer)
    assert fast is not None and fast.final_answer == "巴黎\n是首都" and fast.thought == "我知道了"
    for near_miss in [action + "Observation: 3", action.replace("Action:", "**Action:**"),
                      action.replace('2}', '2'), "Thought:** x\nFinal Answer: 1",
                      "Thought: x\nFinal Answer: 1\nAction: add\nAction Input: {}",
                      'Action: none\nAction Input: {}', "Thought： x\nFinal Answer: 1"]:
        assert _fast(near_miss) is None, near_miss
        assert parse_react(near_miss) == _parse_full(near_miss)

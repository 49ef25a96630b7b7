"""Tool selection: tokens (English and Chinese), BM25 ranking, the offered set."""

from __future__ import annotations

from typing import Any

from miniagent.core.runtime.selection import (
    ToolIndex,
    conversation_text,
    offer,
    select_tools,
    tokenize,
    tool_text,
)
from miniagent.core.tools.tool import Tool
from miniagent.core.types import Message, Step, ToolCall


def schema_tool(name: str, description: str, **params: str) -> Tool:
    properties: dict[str, Any] = {p: {"type": "string", "description": d}
                                  for p, d in params.items()}
    return Tool.from_schema(name=name, description=description,
                            parameters={"type": "object", "properties": properties},
                            fn=lambda args: name)


TOOLS = [
    schema_tool("get_weather", "Current weather and temperature of a city.", city="the city"),
    schema_tool("convert_currency", "Convert an amount of money from one currency to another.",
                amount="how much", target="currency code such as EUR"),
    schema_tool("send_email", "Send an email message to a recipient.", to="address",
                body="the text"),
    schema_tool("translate_text", "Translate text into another language.", text="what",
                language="target language"),
    schema_tool("stock_price", "Latest share price of a listed company.", ticker="symbol"),
    schema_tool("train_tickets", "查询火车票：两个城市之间的列车和余票。", origin="出发城市",
                destination="到达城市"),
    schema_tool("calendarAddEvent", "Add an event to the calendar.", title="the title"),
]


def names(tools: list[Any]) -> list[str]:
    return [t.name for t in tools]


def user(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


def test_tokens_split_snake_and_camel_case_drop_stop_words_and_endings() -> None:
    assert tokenize("calendarAddEvent") == ["calendar", "add", "event"]
    assert tokenize("send_email to the recipients") == ["send", "email", "recipient"]
    assert tokenize("HTTPServer status of 3 cities") == ["http", "serv", "status", "3", "city"]
    # tool selection leaves numbers out (a question's data); a word of letters and digits
    # gives itself and its letters
    assert tokenize("log10 of 1764", numbers=False) == ["log10", "log"]
    assert tokenize("sha256 or sha512", numbers=False) == ["sha256", "sha", "sha512", "sha"]
    assert tokenize("log10 of 1764") == ["log10", "log", "10", "1764"]  # the memory index
    for variant, base in (("reminders", "remind"), ("raining", "rain"), ("planned", "plan"),
                          ("meetings", "meeting"), ("boxes", "box")):
        assert tokenize(variant) == tokenize(base), variant
    assert tokenize("") == []


def test_chinese_gives_characters_and_pairs_and_mixed_text_keeps_both() -> None:
    assert tokenize("火车票") == ["火", "车", "票", "火车", "车票"]
    mixed = tokenize("查一下 weather 北京")
    assert tokenize("weather")[0] in mixed and "北京" in mixed and "查一" in mixed
    assert "的" not in tokenize("北京的天气")  # particles are no evidence on their own


def test_tool_text_covers_name_description_and_parameters() -> None:
    text = tool_text(TOOLS[1])
    assert "convert_currency" in text and "money" in text and "target" in text
    assert "EUR" in text


def test_bm25_ranks_the_right_tool_first() -> None:
    index = ToolIndex(TOOLS)
    cases = {
        "What is the weather in Paris?": "get_weather",
        "How many euros is 100 dollars? convert the money": "convert_currency",
        "Please email Bob the report": "send_email",
        "Translate 'good morning' into German": "translate_text",
        "What is Apple's share price?": "stock_price",
        "Put a dentist appointment event in my calendar": "calendarAddEvent",
    }
    for question, expected in cases.items():
        best = index.top(question, 1)
        assert [TOOLS[i].name for i in best] == [expected], question


def test_a_chinese_question_finds_the_chinese_tool() -> None:
    chosen = select_tools(TOOLS, 2, user("帮我查一下明天从上海到北京的火车票"))
    assert "train_tickets" in names(chosen)


def test_k_tools_in_registration_order_plus_those_already_called() -> None:
    history = user("What is the weather in Paris?")
    history.append(Message(role="assistant", content="I will email it",
                           tool_calls=[ToolCall(id="c1", name="stock_price")]))
    chosen = names(select_tools(TOOLS, 2, history))
    assert "stock_price" in chosen and "get_weather" in chosen and "send_email" in chosen
    assert chosen == [t.name for t in TOOLS if t.name in chosen]  # registration order


def test_tool_results_are_not_part_of_the_query() -> None:
    history = user("What is the weather in Paris?")
    history.append(Message(role="tool", content="translate language currency email",
                           tool_call_id="c1", name="get_weather"))
    assert conversation_text(history) == "What is the weather in Paris?"


def test_few_tools_are_all_offered_and_nothing_matching_keeps_the_previous_choice() -> None:
    assert names(select_tools(TOOLS[:2], 5, user("anything"))) == names(TOOLS[:2])
    assert names(select_tools(TOOLS, 2, user("zzz qqq"))) == names(TOOLS[:2])
    kept = names(select_tools(TOOLS, 2, user("zzz"), previous=["send_email", "stock_price"]))
    assert kept == ["send_email", "stock_price"]


def test_offer_records_names_only_when_selecting() -> None:
    assert offer(TOOLS, None, user("weather"), []) == (TOOLS, None)
    steps = [Step(index=1, offered_tools=["stock_price"])]
    tools, offered = offer(TOOLS, 1, user("zzz"), steps)
    assert offered == ["stock_price"] == names(tools)


def test_the_choice_is_deterministic() -> None:
    history = user("convert money and send an email about the weather")
    first = names(select_tools(TOOLS, 3, history))
    assert all(names(select_tools(list(TOOLS), 3, history)) == first for _ in range(5))
    assert len(first) == 3


# -- what questions look like -------------------------------------------------------------
# Asked as a person asks, against the built-in tools and a user's own tools file: strict
# selection (a small model's aid) offered "Tools: none." for most of these before.

def _person_tools() -> list[Tool]:
    from miniagent.core.tools.builtin import builtin_tools

    return [*builtin_tools("."),
            schema_tool("get_weather", "Get the current weather for a city: conditions (sunny, "
                        "rain, ...) and temperature.", city="The city name"),
            schema_tool("convert_currency", "Convert an amount of money from one currency to "
                        "another at today's rate.", amount="The amount",
                        from_currency="ISO code", to_currency="ISO code"),
            schema_tool("stock_price", "The latest price of a stock, in US dollars.",
                        ticker="The stock's ticker symbol, e.g. 'AAPL'.")]


def _strict_first(question: str) -> list[str]:
    chosen = select_tools(_person_tools(), 2, user(question), strict=True)
    return [t.name for t in chosen]


def test_an_arithmetic_expression_finds_the_calculator() -> None:
    assert _strict_first("What is 17 * 23?")[:1] == ["calculator"]
    assert _strict_first("计算 (12 + 30) * 3 等于多少？")[:1] == ["calculator"]


def test_a_file_name_finds_the_file_tools() -> None:
    assert _strict_first("How many lines does notes.txt have?")[:1] == ["count_file_lines"]


def test_a_question_about_rain_finds_the_weather_tool() -> None:
    assert _strict_first("Is it raining in London right now?")[:1] == ["get_weather"]


def test_money_and_tickers_find_their_tools() -> None:
    assert _strict_first("How much is 250 euros in US dollars?")[:1] == ["convert_currency"]
    assert _strict_first("What's Apple's stock price? The ticker is AAPL.")[:1] == [
        "stock_price"]


def test_a_chinese_question_finds_a_tool_described_in_english() -> None:
    assert _strict_first("北京现在的天气怎么样？")[:1] == ["get_weather"]
    assert _strict_first("100美元换算成欧元是多少？")[:1] == ["convert_currency"]


def test_a_question_no_tool_is_about_still_matches_none() -> None:
    assert _strict_first("What is the capital of Japan?") == []


def test_the_hints_are_bounded() -> None:
    from miniagent.core.runtime.selection import hints

    assert hints("x" * 10_000_000 + " 1 + 1") == ""  # past the first 2,000 characters
    assert "arithmetic" in hints("1 + 1" + "x" * 10_000_000)


def test_words_of_arithmetic_find_the_calculator() -> None:
    """"Add up", "a quarter of", "multiply" ask for arithmetic without an expression: the
    1.5B model summed a file's counts with the line counter, the calculator not offered."""
    found = _strict_first("Read inventory.csv and add up the counts of all items.")
    assert "calculator" in found
    assert "calculator" in _strict_first("Take the humidity and multiply it by 3.")
    assert "calculator" in _strict_first("中国和日本的人口加起来一共多少？")


def test_the_models_own_words_count_as_evidence() -> None:
    """The model's thought says what it needs next ("subtract"): the next offer has it."""
    history = [*user("How many degrees warmer is Rome than Oslo?"),
               Message(role="assistant", content="Thought: I have both; now I subtract them.")]
    chosen = select_tools(_person_tools(), 2, history, strict=True)
    assert "calculator" in names(chosen)


def test_how_many_more_than_is_arithmetic() -> None:
    """"How many degrees warmer is A than B" asks for a difference: the 1.5B model, offered
    no calculator, converted the two temperatures back and forth instead (strict selection
    alone, as that model has it: every matching tool)."""
    tools = _person_tools()

    def matching(question: str) -> list[str]:
        return names(select_tools(tools, len(tools), user(question), strict=True))

    assert "calculator" in matching("How many °C warmer is Rome than Oslo today?")
    assert "calculator" in matching("How much older is Anna than Ben?")
    assert "calculator" not in matching("Which is warmer today, Rome or Oslo?")


def test_a_conversational_verb_is_no_evidence() -> None:
    """"say" matched read_file's "says where it stopped": the 1.5B then read every file."""
    assert _strict_first("How do you say 'thank you' in French?") == []
    assert "read_file" in _strict_first("What does notes.txt say about the budget?")

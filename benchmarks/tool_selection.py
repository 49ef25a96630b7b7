"""Tool selection with 60 tools and 40 questions: prompt tokens per request, and recall.

For each question the first request is rendered twice, offering all 60 tools and offering the
``K`` that :mod:`miniagent.core.runtime.selection` picks, with the ReAct protocol (tools in the
system prompt, plus a grammar that is not counted: it is not prompt) and the native protocol
(the ``tools`` field). Prompt tokens are counted with the tokenizer of the embedded model
(SmolLM2's, through llama.cpp, its ChatML template written out; for native requests the
``tools`` JSON is counted as the text a template would insert), or as characters / 4 when
llama-cpp-python or the model is not installed (the output says which).

Recall@K: the share of questions whose right tool is among the ``K`` offered. Eight questions
are in Chinese: six for tools described in Chinese, two for tools described only in English,
which a lexical index cannot match (they show what a miss costs; describe tools in the users'
language). The question texts were written as a user would ask, not copied from descriptions.

Also printed: the time to choose, against the time to render the same request.

Usage: python benchmarks/tool_selection.py [--k 3 5 8 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from miniagent.core.protocol.native import NativeProtocol
from miniagent.core.protocol.react import ReactProtocol
from miniagent.core.runtime.selection import select_tools
from miniagent.core.tools.tool import Tool
from miniagent.core.types import Message, ModelRequest

# name, description, {parameter: description}
SPECS: list[tuple[str, str, dict[str, str]]] = [
    ("get_weather", "Current weather conditions for a city: temperature, wind, rain.",
     {"city": "City name"}),
    ("weather_forecast", "Weather forecast for the next days in a city.",
     {"city": "City name", "days": "Number of days"}),
    ("air_quality", "Air quality index and pollution level of a city.", {"city": "City name"}),
    ("convert_currency", "Convert an amount of money from one currency to another at today's "
     "exchange rate.", {"amount": "Amount", "source": "From currency", "target": "To currency"}),
    ("stock_quote", "Latest share price and daily change of a listed company's stock.",
     {"ticker": "Stock symbol"}),
    ("crypto_price", "Current price of a cryptocurrency such as bitcoin or ether.",
     {"coin": "Coin name"}),
    ("send_email", "Send an email to a recipient with a subject and body.",
     {"to": "Address", "subject": "Subject", "body": "Text"}),
    ("read_inbox", "List the latest unread emails in the inbox.", {"limit": "How many"}),
    ("send_sms", "Send a text message (SMS) to a phone number.",
     {"phone": "Phone number", "text": "Message"}),
    ("slack_post", "Post a message to a Slack channel.", {"channel": "Channel", "text": "Text"}),
    ("calendar_add", "Create a calendar event or meeting at a date and time.",
     {"title": "Title", "start": "Start time", "attendees": "People invited"}),
    ("calendar_list", "List the calendar events and meetings of a day.", {"date": "Day"}),
    ("set_reminder", "Set a reminder that alerts at a given time.",
     {"text": "What to remember", "time": "When"}),
    ("set_timer", "Start a countdown timer for a number of minutes.", {"minutes": "Duration"}),
    ("world_clock", "Current local time in a timezone or city.", {"timezone": "IANA timezone"}),
    ("translate_text", "Translate text into another language.",
     {"text": "Text", "language": "Target language"}),
    ("dictionary_define", "Definition and pronunciation of an English word.", {"word": "Word"}),
    ("synonyms", "Synonyms and antonyms of a word.", {"word": "Word"}),
    ("wikipedia_search", "Search Wikipedia and return the summary of the best article.",
     {"query": "Topic"}),
    ("web_search", "Search the web and return the top result links and snippets.",
     {"query": "Search terms"}),
    ("news_headlines", "Top news headlines, optionally on a topic.", {"topic": "Topic"}),
    ("calculator", "Evaluate an arithmetic expression.", {"expression": "Expression"}),
    ("unit_convert", "Convert a quantity between units of length, mass, volume or temperature.",
     {"value": "Quantity", "source_unit": "From unit", "target_unit": "To unit"}),
    ("flight_search", "Search flights between two airports on a date.",
     {"origin": "Departure airport", "destination": "Arrival airport", "date": "Day"}),
    ("hotel_search", "Find hotels in a city for given check-in and check-out dates.",
     {"city": "City", "checkin": "Arrival day", "checkout": "Departure day"}),
    ("car_rental", "Find rental cars at a location.", {"location": "Pick-up place"}),
    ("directions", "Driving, walking or transit directions between two places.",
     {"origin": "From", "destination": "To", "mode": "driving, walking or transit"}),
    ("restaurant_search", "Find restaurants near a place by cuisine.",
     {"near": "Place", "cuisine": "Kind of food"}),
    ("recipe_search", "Find cooking recipes for a dish or ingredient.", {"dish": "Dish"}),
    ("nutrition_facts", "Calories and nutrients of a food.", {"food": "Food"}),
    ("movie_showtimes", "Cinema showtimes of a film near a city.",
     {"film": "Film", "city": "City"}),
    ("music_play", "Play a song, album or artist on the speaker.", {"query": "What to play"}),
    ("podcast_search", "Find podcast episodes about a subject.", {"subject": "Subject"}),
    ("read_file", "Read a text file from the workspace.", {"path": "File path"}),
    ("write_file", "Write text to a file in the workspace.", {"path": "File path", "text": "Text"}),
    ("list_directory", "List the files in a folder of the workspace.", {"path": "Folder"}),
    ("delete_file", "Delete a file from the workspace.", {"path": "File path"}),
    ("run_sql", "Run a read-only SQL query on the analytics database.", {"query": "SQL"}),
    ("create_ticket", "Open a support ticket in the issue tracker.",
     {"title": "Title", "description": "Details", "priority": "Priority"}),
    ("git_log", "Show the latest commits of a git repository.", {"repo": "Repository"}),
    ("deploy_service", "Deploy a service version to production.",
     {"service": "Service", "version": "Version"}),
    ("server_status", "Health, CPU and memory of a server.", {"host": "Host name"}),
    ("package_tracking", "Track a parcel shipment by its tracking number.",
     {"tracking_number": "Tracking number"}),
    ("order_status", "Status of an online shop order.", {"order_id": "Order number"}),
    ("pay_invoice", "Pay an invoice from the company bank account.",
     {"invoice_id": "Invoice", "amount": "Amount"}),
    ("expense_report", "File an expense report with receipts.", {"amount": "Amount",
                                                                 "category": "Category"}),
    ("contacts_lookup", "Find a person's phone number and email in the address book.",
     {"name": "Person"}),
    ("smart_light", "Turn lights on or off or dim them in a room.",
     {"room": "Room", "level": "Brightness 0-100"}),
    ("thermostat", "Set the heating thermostat temperature.", {"celsius": "Temperature"}),
    ("image_generate", "Generate an image from a text prompt.", {"prompt": "Description"}),
    ("summarize_text", "Summarize a long text in a few sentences.", {"text": "Text"}),
    ("sports_scores", "Latest scores and results of a sports team.", {"team": "Team"}),
    ("holiday_calendar", "Public holidays of a country in a year.",
     {"country": "Country", "year": "Year"}),
    ("train_tickets", "查询火车票：两个城市之间的高铁、动车车次和余票。",
     {"origin": "出发城市", "destination": "到达城市", "date": "日期"}),
    ("express_tracking", "查询快递物流信息，输入快递单号。", {"number": "快递单号"}),
    ("metro_route", "地铁换乘路线规划：从一个地铁站到另一个地铁站。",
     {"start": "起点站", "end": "终点站"}),
    ("takeout_order", "外卖点餐：在附近的餐厅下单。", {"restaurant": "餐厅", "dish": "菜品"}),
    ("phone_topup", "手机话费充值。", {"phone": "手机号", "amount": "金额"}),
    ("stock_a_share", "A股行情：查询沪深股票的最新股价和涨跌幅。", {"code": "股票代码"}),
    ("pdf_to_text", "Extract the text of a PDF document.", {"path": "PDF file"}),
]

QUESTIONS: list[tuple[str, str]] = [
    ("Is it raining in Lisbon right now?", "get_weather"),
    ("Will it be sunny in Rome over the next three days? I need the forecast.",
     "weather_forecast"),
    ("How bad is the pollution in Delhi today?", "air_quality"),
    ("How many yen do I get for 250 euros?", "convert_currency"),
    ("What is Tesla's stock trading at?", "stock_quote"),
    ("What's the price of bitcoin?", "crypto_price"),
    ("Email Maria the subject 'Budget' and tell her the numbers are final.", "send_email"),
    ("Do I have any unread emails?", "read_inbox"),
    ("Text my brother at +44 7700 900123 that I'm late.", "send_sms"),
    ("Post 'release is out' in the #general Slack channel.", "slack_post"),
    ("Schedule a meeting with Tom tomorrow at 10.", "calendar_add"),
    ("What meetings do I have on Friday?", "calendar_list"),
    ("Remind me to call the dentist at 5pm.", "set_reminder"),
    ("Start a 12 minute timer for the pasta.", "set_timer"),
    ("What time is it in Tokyo?", "world_clock"),
    ("How do you say 'thank you very much' in Korean?", "translate_text"),
    ("What does the word 'ephemeral' mean?", "dictionary_define"),
    ("Give me another word for 'happy'.", "synonyms"),
    ("Who was Ada Lovelace? Give me the encyclopedia summary.", "wikipedia_search"),
    ("What are today's top headlines about climate?", "news_headlines"),
    ("What is 17.5% of 2,340?", "calculator"),
    ("How many kilometres is 26.2 miles?", "unit_convert"),
    ("Find me a flight from JFK to SFO next Monday.", "flight_search"),
    ("I need a hotel in Berlin from the 3rd to the 6th.", "hotel_search"),
    ("How do I get from the Louvre to the Eiffel Tower by transit?", "directions"),
    ("Any good Thai restaurants near Union Square?", "restaurant_search"),
    ("How many calories are in an avocado?", "nutrition_facts"),
    ("Show me the last commits in the miniagent repository.", "git_log"),
    ("Is the db-01 server healthy? Check its CPU and memory.", "server_status"),
    ("Where is my parcel with tracking number 1Z999AA10123456784?", "package_tracking"),
    ("Turn off the lights in the kitchen.", "smart_light"),
    ("Open a support ticket: the login page is broken, high priority.", "create_ticket"),
    ("明天从上海到北京的高铁还有余票吗？", "train_tickets"),
    ("帮我查一下快递单号 SF1234567890 的物流信息", "express_tracking"),
    ("从人民广场地铁站到陆家嘴地铁站怎么换乘？", "metro_route"),
    ("帮我在附近的餐厅点一份宫保鸡丁外卖", "takeout_order"),
    ("给手机号 13800138000 充值 50 元话费", "phone_topup"),
    ("贵州茅台今天的股价涨跌幅是多少？", "stock_a_share"),
    ("东京现在几点？", "world_clock"),  # an English-only tool: no lexical match
    ("把这段话翻译成英文：今天天气很好", "translate_text"),  # likewise
]


def build_tools() -> list[Tool]:
    def make(name: str) -> Callable[[dict[str, Any]], str]:
        return lambda args: name

    return [Tool.from_schema(
        name=name, description=description,
        parameters={"type": "object", "required": list(params),
                    "properties": {p: {"type": "string", "description": d}
                                   for p, d in params.items()}},
        fn=make(name)) for name, description, params in SPECS]


def token_counter() -> tuple[Callable[[str], int], str]:
    """A real tokenizer when one is at hand, else characters / 4."""
    try:
        import llama_cpp

        from miniagent.core.models.local import resolve_model_path

        vocab = llama_cpp.Llama(model_path=str(resolve_model_path()), vocab_only=True,
                                verbose=False)
    except Exception as exc:  # no llama-cpp-python or no model: say so and estimate
        return (lambda text: max(1, len(text) // 4)), f"characters/4 (no tokenizer: {exc})"

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    return count, "SmolLM2-135M's tokenizer (llama.cpp)"


def chatml(request: ModelRequest) -> str:
    text = "".join(f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n"
                   for m in request.messages)
    if request.tools:
        text += json.dumps(request.tools, ensure_ascii=False)
    return text + "<|im_start|>assistant\n"


def measure(ks: list[int]) -> None:
    tools = build_tools()
    assert len(tools) == 60 and len(QUESTIONS) == 40, (len(tools), len(QUESTIONS))
    count, how = token_counter()
    protocols = {"react": ReactProtocol(grammar=True), "native": NativeProtocol()}
    print(f"{len(tools)} tools, {len(QUESTIONS)} questions; tokens counted with {how}\n")
    baseline = {name: statistics.mean(
        count(chatml(proto.render([Message(role="user", content=q)], tools)))
        for q, _ in QUESTIONS) for name, proto in protocols.items()}
    for name, value in baseline.items():
        print(f"all 60 tools, {name:6s}: {value:8.0f} prompt tokens per request")
    print()
    print(f"{'K':>3} {'recall':>8} {'en':>6} {'zh':>6} {'react tok':>10} {'ratio':>6} "
          f"{'native tok':>11} {'ratio':>6}")
    for k in ks:
        hits, tokens = [], {name: [] for name in protocols}
        for question, expected in QUESTIONS:
            history = [Message(role="user", content=question)]
            offered = select_tools(tools, k, history)
            hits.append(expected in {t.name for t in offered})
            for name, proto in protocols.items():
                tokens[name].append(count(chatml(proto.render(history, offered))))
        zh = [h for h, (q, _) in zip(hits, QUESTIONS) if not q.isascii()]
        en = [h for h, (q, _) in zip(hits, QUESTIONS) if q.isascii()]
        react, native = (statistics.mean(tokens[n]) for n in ("react", "native"))
        print(f"{k:>3} {sum(hits):>3}/{len(hits):<4} {sum(en):>2}/{len(en):<3} "
              f"{sum(zh):>2}/{len(zh):<3} {react:>10.0f} {react / baseline['react']:>6.2f} "
              f"{native:>11.0f} {native / baseline['native']:>6.2f}")
    print()
    overhead(tools, protocols["react"])


def overhead(tools: list[Tool], proto: ReactProtocol) -> None:
    """Choosing against rendering (a grammar-cached ReAct render of the chosen tools)."""
    histories = [[Message(role="user", content=q)] for q, _ in QUESTIONS]
    select_tools(tools, 5, histories[0])  # builds the index once, as the first request does
    rounds = 20
    started = time.perf_counter()
    for _ in range(rounds):
        for history in histories:
            select_tools(tools, 5, history)
    choose = (time.perf_counter() - started) / (rounds * len(histories))
    offered = [select_tools(tools, 5, h) for h in histories]
    started = time.perf_counter()
    for _ in range(rounds):
        for history, chosen in zip(histories, offered):
            proto.render(history, chosen)
    render = (time.perf_counter() - started) / (rounds * len(histories))
    print(f"choosing 5 of 60 tools: {choose * 1e6:.0f} µs per request; rendering that request: "
          f"{render * 1e6:.0f} µs (ratio {choose / render:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5, 8, 10])
    measure(parser.parse_args().k)


if __name__ == "__main__":
    main()

"""What the inbox tests share: a tool that needs approval, a session waiting on it, and a
client that reads the CSRF token and the session's version off the page like a browser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from miniagent import Agent, InMemoryStore, Limits, ScriptedModel, SQLiteStore, tool
from miniagent.core.session import AgentSession

HOSTILE = ("</script><script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">"
           "<a href=\"javascript:window.pwned=3\">x</a>")
"""What hostile text looks like (the trace report's red-team payload)."""

PAID: list[str] = []


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone.

    Args:
        to: who is paid
        amount: how much, in euros
    """
    PAID.append(f"{amount} to {to}")
    return f"paid {amount} euros to {to}"


def act(name: str, args: dict[str, Any]) -> str:
    return f"Thought: I pay\nAction: {name}\nAction Input: {json.dumps(args, ensure_ascii=False)}"


def waiting_agent(path: Path | None, script: list[Any], question: str = "Pay Alice 30 euros"
                  ) -> tuple[Agent, ScriptedModel, str]:
    """An agent on a SQLite store at ``path`` (None: in memory) whose session waits for
    approval of ``pay``."""
    model = ScriptedModel(script)
    store = SQLiteStore(path) if path is not None else InMemoryStore()
    agent = Agent(model=model, tools=[pay], store=store)
    result = agent.run(question)
    assert result.status == "awaiting_approval", result.reason
    return agent, model, result.session_id


def hidden(html: str, name: str) -> str:
    """The value of the first hidden field ``name`` of a page."""
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no field {name}"
    return found.group(1)


LOCAL = ("127.0.0.1", 50000)
"""The peer address of a test client: a process on this machine (Starlette's test client
names itself ``testclient``, which an inbox without a token refuses)."""


@tool
def look(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: which city
    """
    return f"{city}: sunny, 21 degrees, a light wind from the west. " * 3


def long_waiting_session(path: Path, steps: int) -> tuple[SQLiteStore, str]:
    """A session of ``steps`` steps in a SQLite store at ``path``, waiting for approval of
    ``pay`` in its last step: a real run of two steps (``look``, then ``pay``) whose first
    step, with its two messages, is repeated (each copy with its own index and call id)."""
    store = SQLiteStore(path)
    agent = Agent(model=ScriptedModel([act("look", {"city": "Paris"}),
                                       act("pay", {"to": "Alice", "amount": 30})]),
                  tools=[look, pay], store=store, limits=Limits(max_steps=steps + 1))
    data = store.load(agent.run("Look, then pay Alice 30 euros").session_id).to_dict()
    first, last = data["steps"]
    paid = data["messages"][3]
    call_id = first["calls"][0]["call"]["id"]
    looked = json.dumps([first, *data["messages"][1:3]], ensure_ascii=False)
    data["steps"], data["messages"] = [], data["messages"][:1]
    for index in range(1, steps):
        step, *said = json.loads(looked.replace(call_id, f"call_{index:06d}"))
        step["index"] = index
        data["steps"].append(step)
        data["messages"] += said
    last["index"] = steps
    data["steps"].append(last)
    data["messages"].append(paid)
    session = AgentSession.from_dict(data)
    store.save(session)
    return store, session.id

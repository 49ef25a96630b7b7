"""An agent process for the Prometheus scrape test: its tool always fails.

It runs ``RUNS`` sessions, each calling ``broken`` ``CALLS`` times before answering, serves
their metrics on a free 127.0.0.1 port, prints the endpoint's URL and waits until its
standard input closes. Run: ``python tests/e2e/metrics_agent.py``.
"""

from __future__ import annotations

import json
import sys

from miniagent import Agent, ScriptedModel, tool
from miniagent.core.models.describe import describe_model
from miniagent.observe.metrics import Metrics

RUNS, CALLS = 2, 3


@tool
def broken(city: str) -> str:
    """A weather service that is down."""
    raise RuntimeError("service unavailable")


def main() -> None:
    calls = [f"Thought: ask\nAction: broken\nAction Input: {json.dumps({'city': f'city {n}'})}"
             for n in range(CALLS)]  # other arguments each time: no repeat guard answers
    script = [*calls, "Final Answer: the service is down"] * RUNS
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[broken])
    metrics = Metrics(model=describe_model(model))
    agent.subscribe(metrics)
    statuses = [agent.run(f"weather in Oslo, {n}?").status for n in range(RUNS)]
    with metrics.serve("127.0.0.1:0") as server:
        print(json.dumps({"url": server.url, "statuses": statuses}), flush=True)
        sys.stdin.read()  # until the test closes it


if __name__ == "__main__":
    main()

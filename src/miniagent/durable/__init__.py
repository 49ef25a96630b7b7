"""miniagent on Temporal: a session is a workflow running the same step logic; each model call
and each tool call is an activity; approvals are updates (or signals).

Needs the ``temporal`` extra (``pip install miniagent[temporal]``)::

    client = await connect("127.0.0.1:7233")
    agent = Agent(model=..., tools=[...], temporal=client, task_queue="agents")
    async with await agent_worker(agent):      # or `miniagent worker` on other machines
        result = await agent.arun("What is 2+3?")

Clients and workers must use :func:`connect` (or :func:`data_converter`): payloads are pydantic
JSON, zlib-compressed when large.
"""

from miniagent.durable.client import DEFAULT_TASK_QUEUE, TemporalSessions, connect, settings_of
from miniagent.durable.contracts import AgentSettings, DecisionInput, SessionInput, SessionView
from miniagent.durable.converter import data_converter
from miniagent.durable.worker import agent_worker, session_worker
from miniagent.durable.workflow import WORKFLOW_NAME, SessionWorkflow

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "WORKFLOW_NAME",
    "AgentSettings",
    "DecisionInput",
    "SessionInput",
    "SessionView",
    "SessionWorkflow",
    "TemporalSessions",
    "agent_worker",
    "connect",
    "data_converter",
    "session_worker",
    "settings_of",
]

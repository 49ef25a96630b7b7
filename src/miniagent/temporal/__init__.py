"""miniagent on Temporal: a session is a workflow running the same run shell and step logic as in
process; each model call and each tool call is an activity; approvals are updates (or signals);
events reach the client's subscribers through the workflow's ``events`` query.

Needs the ``temporal`` extra (``pip install miniagent[temporal]``)::

    client = await connect("127.0.0.1:7233")
    agent = TemporalAgent(Agent(model=..., tools=[...]), client, task_queue="agents")
    async with await agent_worker(agent):      # or `miniagent worker` on other machines
        result = await agent.arun("What is 2+3?")

Clients and workers must use :func:`connect` (or :func:`data_converter`): payloads are pydantic
JSON (zlib-compressed only from 512 KiB).
"""

from miniagent.temporal.agent import TemporalAgent
from miniagent.temporal.client import (
    DEFAULT_TASK_QUEUE,
    TemporalSessions,
    connect,
)
from miniagent.temporal.contracts import (
    DecisionInput,
    EventPage,
    SessionInput,
    SessionView,
    TemporalOptions,
)
from miniagent.temporal.converter import data_converter
from miniagent.temporal.worker import agent_worker, session_worker
from miniagent.temporal.workflow import WORKFLOW_NAME, SessionWorkflow

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "WORKFLOW_NAME",
    "DecisionInput",
    "EventPage",
    "SessionInput",
    "SessionView",
    "SessionWorkflow",
    "TemporalAgent",
    "TemporalOptions",
    "TemporalSessions",
    "agent_worker",
    "connect",
    "data_converter",
    "session_worker",
]

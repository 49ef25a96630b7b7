"""A Temporal worker warms the tools it serves before it polls: when ``agent_worker`` returns,
the warm-up has run (once), and the session's first call, run by the worker, finds it warm;
``miniagent worker`` warms up (and warns of a failed warm-up) before it says it serves."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from temporal_helpers import Processes, act
from temporalio.testing import WorkflowEnvironment

from miniagent import Agent, ScriptedModel, tool
from miniagent.cli.build import RunConfig, temporal_agent
from miniagent.core.models.base import Capabilities
from miniagent.core.runtime.loop import first_request
from miniagent.core.runtime.run import rules_for, with_small_model_aids
from miniagent.core.tools.toolbox import Toolbox, ToolRegistry
from miniagent.core.types import ModelRequest
from miniagent.temporal import TemporalSessions, agent_worker
from miniagent.temporal.worker import warm_served

loads: list[str] = []


@tool(warmup=lambda: loads.append("index"))
def lookup(key: str) -> str:
    """Look a key up in the index."""
    return f"{key}: {'warm' if loads else 'cold'}"


@pytest.mark.asyncio(loop_scope="session")
async def test_the_worker_warms_its_tools_before_it_serves(skip_env: WorkflowEnvironment,
                                                           task_queue: str) -> None:
    model = ScriptedModel([act("lookup", {"key": "k"}), "Final Answer: done"])
    agent = Agent(model=model, tools=[lookup])
    worker = await agent_worker(agent, skip_env.client, task_queue=task_queue)
    assert loads == ["index"]  # before the worker polls
    async with worker:
        sessions = TemporalSessions(skip_env.client, task_queue)
        result = await sessions.result(await sessions.start("look k up"))
    assert result.status == "completed"
    assert result.steps[0].observations[0].output == "k: warm"
    again = await warm_served(agent.sources, agent.model)  # what another worker would do
    assert again.outcomes[0].status == "already_warm" and loads == ["index"]


WARM_TOOLS = '''
import pathlib

from miniagent import tool

MARK = pathlib.Path(__file__).with_name("warmed.mark")


@tool(warmup=lambda: MARK.write_text("yes"))
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def no_index():
    raise RuntimeError("no index here")


@tool(warmup=no_index)
def search(query: str) -> str:
    """Search."""
    return query
'''


@pytest.mark.timeout(180)
def test_miniagent_worker_warms_up_before_it_serves(procs: Processes, task_queue: str,
                                                    tmp_path: Path) -> None:
    tools = tmp_path / "warm_tools.py"
    tools.write_text(WARM_TOOLS, encoding="utf-8")
    worker = procs.worker(task_queue, "react", "--tools", str(tools))
    assert worker.stderr is not None
    lines: list[str] = []
    for line in worker.stderr:  # a few lines, then it serves until the fixture stops it
        lines.append(line.strip())
        if "serving task queue" in line:
            break
    assert (tmp_path / "warmed.mark").read_text() == "yes", lines
    assert lines[-1].startswith("miniagent worker: serving task queue"), lines
    assert ("miniagent: warning: warm-up of tool search failed: RuntimeError: no index here; "
            "it warms on first use instead") in lines[:-1]


class SmallWarmModel(ScriptedModel):
    """A small model (as the embedded one) that keeps the request each warm-up evaluated."""

    def __init__(self) -> None:
        super().__init__([])
        self.warmed: list[ModelRequest | None] = []

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(super().capabilities, small_model=True)

    async def warmup(self, request: ModelRequest | None = None) -> None:
        self.warmed.append(request)


@tool
def find_key(key: str) -> str:
    """Find a key in the index."""
    return key


@tool
def forecast(city: str) -> str:
    """Weather forecast of a city."""
    return city


async def test_a_worker_warms_its_model_for_the_first_step_of_a_client_without_options(
        ) -> None:
    """``miniagent worker`` serves no agent of its own: it warms the prompt of the first step
    ``miniagent run --temporal`` sends (the aids the workers' small model turns on), so a
    question matching the first tool finds everything before it cached."""
    model = SmallWarmModel()
    sources = [ToolRegistry([find_key, forecast])]
    report = await warm_served(sources, model)
    assert report.ok and len(model.warmed) == 1 and model.warmed[0] is not None
    client = temporal_agent(RunConfig(), object(), "q", interactive=False)
    caps = model.capabilities
    rules = rules_for(with_small_model_aids(client.spec), await Toolbox.gather(sources),
                      tool_mode=caps.tool_mode, native_tools=caps.native_tools)
    first = first_request(rules, "Find the key k.")
    assert model.warmed[0].messages[:-1] == first.messages[:-1]
    assert model.warmed[0].tools == first.tools


@pytest.mark.asyncio(loop_scope="session")
async def test_an_agent_worker_warms_its_model_for_its_agent(skip_env: WorkflowEnvironment,
                                                             task_queue: str) -> None:
    model = SmallWarmModel()
    agent = Agent(model=model, tools=[find_key, forecast], instructions="Be brief.")
    async with await agent_worker(agent, skip_env.client, task_queue=task_queue):
        pass
    rules = rules_for(agent.spec, await Toolbox.gather(agent.sources), protocol=agent.protocol)
    (warmed,) = model.warmed
    assert warmed is not None and "Be brief." in warmed.messages[0]["content"]
    assert warmed.messages[:-1] == first_request(rules, "Find the key k.").messages[:-1]

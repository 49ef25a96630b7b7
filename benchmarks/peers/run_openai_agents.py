"""The OpenAI Agents SDK: ``Agent`` + ``Runner`` on ``OpenAIChatCompletionsModel`` over an
``AsyncOpenAI(base_url=...)`` client, tracing disabled (see ``common.py``).

No instructions (the framework's default: none). Tools through ``function_tool`` (schema
from the signature, descriptions from the docstring, strict mode: the framework's default);
a tool error goes back to the model as text (the default ``failure_error_function``).
``Runner.run(max_turns=max_steps)``: past it ``MaxTurnsExceeded`` ends the run (status
``max_steps``). A reply without tool calls is the final output, whatever its text says.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.exceptions import MaxTurnsExceeded
from common import Job, Outcome, main
from openai import AsyncOpenAI

set_tracing_disabled(True)


async def run_task(job: Job, task: dict[str, str], tools: list[Any]) -> Outcome:
    client = AsyncOpenAI(base_url=job.base_url, api_key=job.api_key, timeout=job.timeout)
    agent = Agent(name="assistant",
                  model=OpenAIChatCompletionsModel(model=job.model, openai_client=client),
                  model_settings=ModelSettings(temperature=job.temperature,
                                               max_tokens=job.max_tokens),
                  tools=[function_tool(fn) for fn in tools])
    try:
        result = await Runner.run(agent, task["input"], max_turns=job.max_steps)
    except MaxTurnsExceeded as exc:
        return Outcome(final_answer=None, status="max_steps", error=str(exc)[:500])
    usage = result.context_wrapper.usage
    return Outcome(final_answer=None if result.final_output is None else str(result.final_output),
                   extra={"framework_tokens": {"prompt": usage.input_tokens,
                                               "completion": usage.output_tokens}})


if __name__ == "__main__":
    main(run_task)

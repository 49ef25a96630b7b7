"""smolagents' ``ToolCallingAgent`` on the bundled eval (see ``common.py`` for the protocol).

Its own system prompt (the framework's default: it teaches the ``final_answer`` tool, which
is how a ToolCallingAgent ends a run). Requests carry ``tool_choice: "required"`` (the
framework's default); a reply without ``tool_calls`` is parsed for a JSON call in its text.
After ``max_steps`` steps without a final answer the framework asks the model once more for
one (``provide_final_answer``): that answer is kept, with status ``max_steps``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import Job, Outcome, main
from smolagents import OpenAIServerModel, ToolCallingAgent, tool
from smolagents.monitoring import LogLevel

INTERNAL_TOOLS = ["final_answer"]


def run_task(job: Job, task: dict[str, str], tools: list[Any]) -> Outcome:
    model = OpenAIServerModel(model_id=job.model, api_base=job.base_url, api_key=job.api_key,
                              client_kwargs={"timeout": job.timeout},
                              temperature=job.temperature, max_tokens=job.max_tokens)
    agent = ToolCallingAgent(tools=[tool(fn) for fn in tools], model=model,
                             max_steps=job.max_steps, verbosity_level=LogLevel.OFF,
                             return_full_result=True)
    result = agent.run(task["input"])
    errors = [str(step["error"].get("type") if isinstance(step["error"], dict) else step["error"])
              for step in result.steps if isinstance(step, dict) and step.get("error")]
    usage = result.token_usage
    return Outcome(
        final_answer=None if result.output is None else str(result.output),
        status="completed" if result.state == "success" else "max_steps",
        extra={"internal_tools": INTERNAL_TOOLS, "framework_state": result.state,
               "step_errors": errors,
               "framework_tokens": None if usage is None else {
                   "prompt": usage.input_tokens, "completion": usage.output_tokens}})


if __name__ == "__main__":
    main(run_task)

"""Pydantic AI's ``Agent`` on an OpenAI-compatible provider (see ``common.py``).

No instructions (the framework's default: none); ``output_type=str``, so a reply without
tool calls is the final answer, whatever its text says. Tool parameter descriptions come
from the docstrings (griffe, as the framework does by default). A tool's error is raised
again as ``ModelRetry`` (Pydantic AI's way of showing a tool error to the model; any other
exception would end the run), with ``max_retries = max_steps`` per tool so that the retry
budget is not the limit. ``UsageLimits(request_limit=max_steps)``: past it the run ends
with ``UsageLimitExceeded`` (status ``max_steps``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import Job, Outcome, main
from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry, Tool
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits


def retrying(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its errors shown to the model (``ModelRetry``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise ModelRetry(str(exc)) from exc

    return wrapper


async def run_task(job: Job, task: dict[str, str], tools: list[Any]) -> Outcome:
    client = AsyncOpenAI(base_url=job.base_url, api_key=job.api_key, timeout=job.timeout)
    model = OpenAIChatModel(job.model, provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, output_type=str,
                  tools=[Tool(retrying(fn), takes_ctx=False, max_retries=job.max_steps)
                         for fn in tools],
                  model_settings=ModelSettings(temperature=job.temperature,
                                               max_tokens=job.max_tokens))
    try:
        result = await agent.run(task["input"],
                                 usage_limits=UsageLimits(request_limit=job.max_steps))
    except UsageLimitExceeded as exc:
        return Outcome(final_answer=None, status="max_steps", error=str(exc)[:500])
    usage = result.usage
    return Outcome(final_answer=str(result.output), extra={"framework_tokens": {
        "prompt": usage.input_tokens, "completion": usage.output_tokens}})


if __name__ == "__main__":
    main(run_task)

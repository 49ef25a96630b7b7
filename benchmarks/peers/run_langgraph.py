"""LangGraph's prebuilt ``create_react_agent`` with ``ChatOpenAI`` (see ``common.py``).

No system prompt (the framework's default: none). The tools are LangChain tools made from
the plain functions with ``parse_docstring=True`` (the parameter descriptions of the
docstrings reach the schema, as in miniagent). ``ToolNode(handle_tool_errors=True)``: a tool
error goes back to the model as a tool message (today's default re-raises every error but
invalid arguments, which would end the run). ``max_steps`` model calls are allowed through
``recursion_limit = 2 * max_steps`` (a model call and a tool call are one super-step each);
past that the prebuilt agent answers "Sorry, need more steps ..." (status ``max_steps``).
A reply without ``tool_calls`` is the final answer, whatever its text says.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
warnings.filterwarnings("ignore", category=DeprecationWarning)

from common import Job, Outcome, main  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.errors import GraphRecursionError  # noqa: E402
from langgraph.prebuilt import ToolNode, create_react_agent  # noqa: E402

GAVE_UP = "need more steps"


async def run_task(job: Job, task: dict[str, str], tools: list[Any]) -> Outcome:
    model = ChatOpenAI(model=job.model, base_url=job.base_url, api_key=job.api_key,
                       temperature=job.temperature, max_tokens=job.max_tokens,
                       timeout=job.timeout)
    node = ToolNode([StructuredTool.from_function(fn, parse_docstring=True) for fn in tools],
                    handle_tool_errors=True)
    agent = create_react_agent(model, node)
    try:
        state = await agent.ainvoke({"messages": [("user", task["input"])]},
                                    {"recursion_limit": 2 * job.max_steps})
    except GraphRecursionError as exc:
        return Outcome(final_answer=None, status="max_steps", error=str(exc)[:500])
    replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
    last = replies[-1] if replies else None
    answer = None if last is None else str(last.text)  # the text parts of the content
    gave_up = answer is not None and GAVE_UP in answer and len(replies) >= job.max_steps
    usage = [m.usage_metadata for m in replies if m.usage_metadata]
    return Outcome(final_answer=answer, status="max_steps" if gave_up else "completed",
                   extra={"framework_tokens": {
                       "prompt": sum(u["input_tokens"] for u in usage),
                       "completion": sum(u["output_tokens"] for u in usage)} if usage else None})


if __name__ == "__main__":
    main(run_task)

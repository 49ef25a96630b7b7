"""The defaults of an agent's limits and generation settings, written once.

``Agent``, ``Limits``, ``ModelRequest`` and the CLI all take them from here.
"""

MAX_STEPS = 10
"""Model calls a run may make before it ends with ``max_steps``."""
TEMPERATURE = 0.0
"""Sampling temperature: 0 keeps models in format."""
MAX_TOKENS = 1024
"""Completion tokens per model call: enough that an Action line is not cut off."""
MAX_OBSERVATION_CHARS = 4000
"""Longer tool outputs are cut, with an explicit notice."""
REPEAT_LIMIT = 3
"""The same call this many times gets an intervention; once more ends the run."""
MAX_CALLS_PER_STEP = 32
"""Tool calls run from one reply; the model is told when it sent more."""
TOOL_CONCURRENCY = 8
"""Tool calls of one step that run at the same time."""
SMALL_MODEL_ROUNDS = 1
"""Steps with successful calls a small model makes per turn before it must answer, unless the
agent is given ``answer_after_results``: one round of lookups, then the answer, instead of
calling on with its own results until ``max_steps``."""

SMALL_MODEL_TOOLS = 2
"""Tools offered per step to a small model (``Capabilities.small_model``) unless the agent is
given ``tool_selection``: fewer tools, a shorter prompt and fewer wrong picks."""
WARMUP_TIMEOUT = 30.0
"""Seconds each warm-up of ``Agent.start()`` may take (see :mod:`miniagent.core.tools.warmup`)."""
RETRY_MAX_ATTEMPTS = 100
"""The most tries a :class:`~miniagent.core.retry.RetryPolicy` may make of one call (a policy of
10**9 tries without delay once made 122,000 calls in 10 s)."""
RETRY_MAX_DELAY = 3600.0
"""The longest wait, in seconds, a :class:`~miniagent.core.retry.RetryPolicy` may set between
tries."""
AGENT_TOOL_MAX_DEPTH = 3
"""How deep agents used as tools may nest by default (a direct sub-agent is depth 1; see
:mod:`miniagent.core.tools.agent_tool`)."""

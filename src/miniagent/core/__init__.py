"""The core of miniagent: what every agent runs, whatever extensions it uses.

``agent`` (the :class:`~miniagent.Agent`), ``types`` and ``errors`` (the contracts),
``session`` (the saved form of a run), ``runtime/`` (the step logic and the in-process
driver), ``protocol/`` (how a model writes an action), ``models/`` (transports),
``tools/`` (tool sources and the shared executor) and ``store/`` (checkpoint stores).
The optional parts beside it (``temporal``, ``mcp``, ``ui``, ``memory``, ``observe``,
``evals``, ``cli``, ``testing``, ``report``) depend on the core, never the reverse.
Public names are exported from :mod:`miniagent`.
"""

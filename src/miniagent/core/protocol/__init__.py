"""How a model expresses an action: the :class:`~.base.ActionProtocol` interface and its
implementations (``react``, ``native``, ``hybrid``, ``auto``), registered by name
(:mod:`.registry`), with the ReAct parser, the GBNF grammar and the wire normaliser. Pure code:
protocols run inside a Temporal workflow too."""

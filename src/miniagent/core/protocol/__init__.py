"""How a model expresses an action: the :class:`~.base.ActionProtocol` interface (and the tool
choice every protocol honours) and its implementations (``react``, ``native``, ``hybrid``,
``auto``), registered by name (:mod:`.registry`), with the ReAct parser and the GBNF grammar.
Pure code: protocols run inside a Temporal workflow too."""

"""Tools and where they come from: ``@tool`` and :class:`~.registry.Tool` (functions and JSON
Schema tools), the :class:`~.source.ToolSource` interface, the wrappers that stack rules on any
source (:mod:`.wrappers`), the run's :class:`~.toolbox.Toolbox` (the one executor every call goes
through), agents as tools, argument checking and coercion, and the safe built-in tools."""

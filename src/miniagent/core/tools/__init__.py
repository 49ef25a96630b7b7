"""Tools and where they come from: ``@tool`` and :class:`~.tool.Tool` (functions and JSON
Schema tools, and how a call's arguments are checked), the :class:`~.toolbox.ToolSource`
interface and the run's :class:`~.toolbox.Toolbox` (the one executor every call goes through),
the source of plain functions (:class:`~.registry.ToolRegistry`), the wrappers that stack rules
on any source (:mod:`.wrappers`), agents as tools, coercion, and the safe built-in tools."""

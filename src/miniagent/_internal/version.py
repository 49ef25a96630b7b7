"""miniagent's version, as installed (``miniagent --version``, ``mcp-serve``'s server info)."""

from __future__ import annotations

import importlib.metadata

__all__ = ["installed_version"]


def installed_version() -> str:
    """The installed package's version; the source's own ``__version__`` where it runs
    uninstalled."""
    try:
        return importlib.metadata.version("miniagent")
    except importlib.metadata.PackageNotFoundError:
        from miniagent import __version__

        return __version__

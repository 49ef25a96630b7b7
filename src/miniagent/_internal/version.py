"""miniagent's version: the source's own (:data:`__version__`, the public API's), and as
installed (``miniagent --version``, ``mcp-serve``'s server info)."""

from __future__ import annotations

__all__ = ["__version__", "installed_version"]

__version__ = "0.1.0"
"""The version of this source tree (``pyproject.toml`` says the same)."""


def installed_version() -> str:
    """The installed package's version; the source's own :data:`__version__` where it runs
    uninstalled."""
    import importlib.metadata  # only when asked: not on ``import miniagent``'s path

    try:
        return importlib.metadata.version("miniagent")
    except importlib.metadata.PackageNotFoundError:
        return __version__

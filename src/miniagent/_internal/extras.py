"""miniagent's extras, the modules each one installs, and the one error their absence gives.

``pip install miniagent`` brings the core only; a command or an API that needs an extra's module
imports it when used. Where that import fails, :func:`missing_extra` turns the
``ModuleNotFoundError`` into a :class:`~miniagent.core.errors.ConfigError` naming the install
command, the one line the command line prints (:func:`miniagent.cli.common.cli_errors`).

>>> str(missing_extra(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn")))
"this needs the 'ui' extra (uvicorn is not installed): pip install 'miniagent[ui]'"
>>> missing_extra(ModuleNotFoundError("No module named 'pydantic'", name="pydantic")) is None
True
"""

from __future__ import annotations

from miniagent.core.errors import ConfigError

__all__ = ["EXTRA_MODULES", "install_command", "missing_extra"]

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "ui": ("starlette", "uvicorn"),
    "temporal": ("temporalio",),
    "metrics": ("prometheus_client",),
    "otel": ("opentelemetry",),
    "mcp": ("mcp",),
    "local": ("xllamacpp",),
}
"""The top-level modules each extra installs that miniagent imports (a test checks them
against ``pyproject.toml``)."""

_EXTRA_OF = {module: extra for extra, modules in EXTRA_MODULES.items() for module in modules}


def install_command(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'miniagent[{extra}]'"


def missing_extra(exc: ImportError, what: str = "this") -> ConfigError | None:
    """The error to show for ``exc`` when the module it missed belongs to an extra (``what``
    names what needs it); None when it is any other import error, which is a bug to show
    in full."""
    module = (exc.name or "").partition(".")[0]
    extra = _EXTRA_OF.get(module)
    if extra is None or not isinstance(exc, ModuleNotFoundError):
        return None
    return ConfigError(f"{what} needs the '{extra}' extra ({module} is not installed): "
                       f"{install_command(extra)}")

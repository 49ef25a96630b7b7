"""The browser inbox: approve, follow and inspect sessions in a local web page.

``miniagent ui`` serves it; :func:`app` returns it as an ASGI application to mount in a
server of one's own. Pages are rendered on the server (no JavaScript build), make no request
elsewhere, and carry a strict Content-Security-Policy; decisions take the same path as
``miniagent sessions approve/deny`` (see :mod:`miniagent.ui.backend`), and the security model
is in :mod:`miniagent.ui.security`. Needs the ``ui`` extra (Starlette, uvicorn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from miniagent.ui.server import app

__all__ = ["app"]


def __getattr__(name: str) -> Any:
    # Starlette is imported with the app, not with miniagent.ui's name
    if name == "app":
        try:
            from miniagent.ui.server import app
        except ImportError as exc:
            from miniagent.core.errors import ConfigError

            raise ConfigError(f"the inbox needs Starlette and uvicorn ({exc}); install them "
                              "with: pip install 'miniagent[ui]'") from None
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

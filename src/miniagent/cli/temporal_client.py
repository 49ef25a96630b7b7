"""The command line's Temporal client, and why a process that made one leaves with ``os._exit``.

The Temporal SDK sometimes aborts at interpreter exit after a clean finish (sdk-python#300):
its runtime's threads outlive the command. So every command that talks to a cluster connects
through :func:`connect`, which records that this process made a client, and
:func:`miniagent.cli.main` (the one place the process exits) then flushes the output and
leaves with ``os._exit`` and the command's exit code.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from miniagent.cli.common import fail

if TYPE_CHECKING:
    from temporalio.client import Client

_MADE = threading.Event()


async def connect(address: str) -> Client:
    """A client for the cluster at ``HOST:PORT`` (see the module docstring).

    Raises:
        ConfigError: nothing answers there.
    """
    from miniagent.temporal import connect as connect_to

    _MADE.set()  # the SDK's runtime starts with the attempt, answered or not
    return await connect_to(address)


def made_a_client() -> bool:
    """Whether this process connected to a cluster: then it leaves with ``os._exit``."""
    return _MADE.is_set()


@contextmanager
def on_the_cluster() -> Iterator[None]:
    """Ctrl-C here stops this process only: one line, exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        raise fail("interrupted (the session continues on the cluster)", 130) from None

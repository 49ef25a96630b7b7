"""The seal on a session's command-line record: only this user's miniagent makes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from miniagent.cli.seal import key_path, sealed, unsealed
from miniagent.core.errors import ConfigError


@pytest.fixture(autouse=True)
def _own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def test_a_sealed_record_reads_back_and_a_changed_one_does_not() -> None:
    record = {"base_url": "http://127.0.0.1:8000/v1", "tools": ["/home/me/tools.py"], "问": 1}
    metadata = sealed(record)
    assert unsealed(metadata) == record
    assert oct(key_path().stat().st_mode & 0o777) == "0o600"
    forged = {**metadata, "cli": {**record, "tools": ["/tmp/evil.py"]}}
    assert unsealed(forged) is None
    assert unsealed({"cli": record}) is None  # no seal, as run(metadata=...) gives it
    assert unsealed({"cli": record, "cli_seal": 7}) is None


def test_another_key_does_not_open_a_record(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = sealed({"model": "m"})
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "another user"))
    assert unsealed(metadata) is None  # and no key is drawn just to read


def test_a_damaged_key_is_one_clear_error() -> None:
    sealed({"model": "m"})
    key_path().write_text("not hex", encoding="ascii")
    assert unsealed({"cli": {"model": "m"}, "cli_seal": "00"}) is None  # nothing trusted
    with pytest.raises(ConfigError, match="is damaged or unreadable"):
        sealed({"model": "m"})

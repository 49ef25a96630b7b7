"""The embedded model's file for tests that generate with it, or a skip saying why there is
none (``xllamacpp`` or the model package missing).

Reused by the tests of the embedded model::

    from embedded_model import model_path
"""

from __future__ import annotations

from pathlib import Path

import pytest

from miniagent.core.errors import ConfigError
from miniagent.core.models.local import resolve_model_path


def model_path() -> Path:
    """The GGUF file the embedded model loads; skips the test where it cannot run."""
    pytest.importorskip("xllamacpp")
    try:
        return resolve_model_path()
    except ConfigError as exc:
        pytest.skip(str(exc))

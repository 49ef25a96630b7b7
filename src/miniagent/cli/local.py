"""The embedded local model for ``miniagent run`` when no endpoint is configured (the
``miniagent model`` commands are in :mod:`miniagent.cli.model_cmd`)."""

from __future__ import annotations

from typing import cast

from miniagent.core.models.catalog import DEFAULT_MODEL
from miniagent.core.models.local import LocalModel
from miniagent.core.types import ToolMode

__all__ = ["TINY_MODEL_NOTICE", "local_model", "local_notice"]

TINY_MODEL_NOTICE = (
    "This tiny model is for trying the loop offline, not for real work: it follows the "
    "format (grammar-constrained) but often picks the wrong tool or answer. For real work "
    f"install a bigger model (miniagent model install {DEFAULT_MODEL}), pass --model-path "
    "with a bigger GGUF (e.g. a 7B instruct model, Q4_K_M) or --base-url of a server "
    "(llama.cpp, vLLM, Ollama, ...)."
)
"""Shown when the embedded model is a tiny one (see
:func:`miniagent.core.models.profiles.is_tiny`)."""


def local_model(model_path: str | None, tool_mode: str, grammar: bool) -> LocalModel:
    """Build the embedded model for the CLI.

    Args:
        model_path: ``--model-path`` (a file or an installed catalog model's name);
            ``None`` resolves one (see :func:`~miniagent.core.models.local.resolve_model_path`).
        tool_mode: ``react``, ``native`` or ``auto`` (``auto`` runs grammar ReAct).
        grammar: Whether to honour grammar-constrained decoding.

    Raises:
        ConfigError: The ``local`` extra or the model is missing; the message is the one
            line to show.
    """
    return LocalModel(model_path, tool_mode=cast(ToolMode, tool_mode), grammar=grammar)


def local_notice(model: LocalModel) -> str:
    """The line telling the user which local model runs (and, if tiny, what it is for)."""
    path = model.model_path
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    named = f"{model.info.name}, " if model.info.name else ""
    head = (f"No endpoint configured: using the embedded model {path.name} ({named}"
            f"{size / 1e6:.0f} MB, {model.n_threads} thread{'' if model.n_threads == 1 else 's'}).")
    return f"{head} {TINY_MODEL_NOTICE}" if model.tiny else head

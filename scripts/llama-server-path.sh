#!/usr/bin/env bash
# Prints the path of a llama-server binary, building it once when needed: LLAMA_SERVER when set,
# else LLAMA_CPP_DIR's build-portable/bin/llama-server (built on first use; cmake's output goes to
# stderr). The one build the LiteLLM check and the stall evaluation share.
#
# Portable, not native: GGML_NATIVE=OFF builds the same instruction sets llama-cpp-sys-2 builds
# for troupe itself (SSE4.2, AVX, AVX2, FMA, F16C, BMI2), so a build kept in a cache that moves
# between machines, or made on a virtual CPU whose -march=native claims more than it runs (CI's
# did: "Illegal instruction"), still starts. The folder's name says so; an old native `build/`
# beside it is never used.
set -euo pipefail

if [ -n "${LLAMA_SERVER:-}" ]; then
  echo "$LLAMA_SERVER"
  exit 0
fi
SRC="${LLAMA_CPP_DIR:?set LLAMA_SERVER to a llama-server binary or LLAMA_CPP_DIR to a llama.cpp tree with tools/server}"
BUILD="$SRC/build-portable"
SERVER="$BUILD/bin/llama-server"
if [ ! -x "$SERVER" ]; then
  {
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=ON \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_OPENMP=OFF -DGGML_NATIVE=OFF
    cmake --build "$BUILD" --target llama-server -j"${LLAMA_BUILD_JOBS:-$(nproc)}"
  } >&2
fi
# A binary that cannot run here fails now, with its own words, not later as a server that exited.
"$SERVER" --version >&2 || { echo "$SERVER does not run on this machine" >&2; exit 1; }
echo "$SERVER"

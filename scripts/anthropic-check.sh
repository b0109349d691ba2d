#!/usr/bin/env bash
# Proves troupe's Anthropic provider against a real third-party implementation of the Messages
# API: LiteLLM's proxy (PyPI, pinned), serving `/v1/messages` on 127.0.0.1 in front of a local
# OpenAI-compatible llama.cpp server running the local model (SmolLM2-135M). Installs LiteLLM
# into a cached venv, starts both servers on free loopback ports, runs the live provider tests
# (crates/models/tests/suite/model_anthropic_live.rs: a streamed answer with usage, a tool call
# round trip), and stops both servers on any exit.
#
#   LLAMA_SERVER=/path/to/llama-server scripts/anthropic-check.sh
#   LLAMA_CPP_DIR=…/vendor/llama.cpp scripts/anthropic-check.sh   # builds llama-server once
#   (scripts/llama-server-path.sh: the one build, portable, shared with the stall evaluation)
#
# llama-server: the llama-cpp-python sdist from PyPI vendors the whole llama.cpp tree, server
# included (see scripts/stall-llama-server.sh for the build). TROUPE_MODEL picks another GGUF;
# TROUPE_CI_CACHE moves the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

LITELLM_VERSION=1.77.7
CACHE="${TROUPE_CI_CACHE:-$HOME/.cache/troupe-ci}"
VENV="$CACHE/litellm-venv"
# Read whole before matching: under pipefail, `pip show | grep -q` fails when grep stops reading
# early (pip gets SIGPIPE), and the venv was reinstalled on every run.
installed="$("$VENV/bin/pip" show litellm 2>/dev/null || true)"
if [ ! -x "$VENV/bin/litellm" ] || ! grep -qx "Version: $LITELLM_VERSION" <<<"$installed"; then
  echo "installing litellm[proxy]==$LITELLM_VERSION into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "litellm[proxy]==$LITELLM_VERSION"
fi

MODEL="${TROUPE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/troupe/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -f "$MODEL" ] || { echo "no model at $MODEL (run any local-model example once, or set TROUPE_MODEL)" >&2; exit 1; }

SERVER="$(scripts/llama-server-path.sh)"

# Build first, so that the servers wait for the tests, not for the compiler.
cargo test -q -p troupe-models --all-features --test all --no-run

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_for() {
  local url="$1" pid="$2" log="$3"
  for _ in $(seq 1 180); do
    if curl -fsS "$url" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "server exited:"; cat "$log"; exit 1; fi
    sleep 1
  done
  echo "server at $url did not start:"; cat "$log"; exit 1
}

LLAMA_PORT="$(free_port)"
# --jinja with a template that renders tools (SmolLM2's own does not, and this llama.cpp has no
# generic fallback): Qwen 2.5's, ChatML like SmolLM2's, from the same llama.cpp tree when there.
TEMPLATE_ARGS=()
for t in "${LLAMA_CPP_DIR:-}" "$(dirname "$SERVER")/../.."; do
  if [ -n "$t" ] && [ -f "$t/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja" ]; then
    TEMPLATE_ARGS=(--chat-template-file "$t/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
    break
  fi
done
"$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$LLAMA_PORT" -c 8192 --jinja "${TEMPLATE_ARGS[@]}" \
  -t "${LLAMA_THREADS:-$(nproc)}" --no-webui >"$WORK/llama.log" 2>&1 &
PIDS+=($!)
wait_for "http://127.0.0.1:$LLAMA_PORT/health" "${PIDS[-1]}" "$WORK/llama.log"
echo "llama-server up on 127.0.0.1:$LLAMA_PORT"

# The proxy routes the model name troupe sends to the llama.cpp server's OpenAI endpoint.
PROXY_PORT="$(free_port)"
PROXY_KEY="sk-troupe-check-$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
cat >"$WORK/litellm.yaml" <<EOF
model_list:
  - model_name: claude-local
    litellm_params:
      model: openai/smollm2
      api_base: http://127.0.0.1:$LLAMA_PORT/v1
      api_key: none
general_settings:
  master_key: $PROXY_KEY
litellm_settings:
  telemetry: false
EOF
# `exec`: the PID kept is LiteLLM's own, so the cleanup stops it, not just its subshell.
(cd "$WORK" && exec env LITELLM_LOG=ERROR "$VENV/bin/litellm" --config "$WORK/litellm.yaml" \
  --host 127.0.0.1 --port "$PROXY_PORT" >"$WORK/litellm.log" 2>&1) &
PIDS+=($!)
wait_for "http://127.0.0.1:$PROXY_PORT/health/liveliness" "${PIDS[-1]}" "$WORK/litellm.log"
echo "litellm $LITELLM_VERSION up on 127.0.0.1:$PROXY_PORT"

TROUPE_ANTHROPIC_CHECK_URL="http://127.0.0.1:$PROXY_PORT" \
  TROUPE_ANTHROPIC_CHECK_MODEL=claude-local ANTHROPIC_API_KEY="$PROXY_KEY" \
  cargo test -q -p troupe-models --all-features --test all model_anthropic_live -- \
  --nocapture --test-threads=1 ||
  { echo "--- litellm log"; tail -50 "$WORK/litellm.log"; exit 1; }
echo "anthropic check passed"

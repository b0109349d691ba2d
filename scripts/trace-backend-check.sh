#!/usr/bin/env bash
# Proves that troupe's traces render in a real OpenTelemetry backend: Arize Phoenix, pinned, from
# PyPI. Installs it into a cached venv, starts it on a free loopback port in a temporary working
# directory, runs the `traces` example (a three-agent team with tools) and the `long_session`
# example (an automatic compaction) with OTLP export pointed at it, then checks what Phoenix
# stored against the runs' own JSONL trace files (scripts/trace_backend_check.py). Phoenix takes
# spans only, so the examples' metrics export is off here (tests/suite/otlp.rs checks metrics).
# Phoenix is stopped and the temporary directory removed on any exit.
#
#   scripts/trace-backend-check.sh            # what .ci/run runs
#   TROUPE_CI_CACHE=/tmp/cache scripts/trace-backend-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PHOENIX_VERSION=20.26.1
CACHE="${TROUPE_CI_CACHE:-$HOME/.cache/troupe-ci}"
VENV="$CACHE/phoenix-$PHOENIX_VERSION"
if [ ! -x "$VENV/bin/phoenix" ]; then
  echo "installing arize-phoenix==$PHOENIX_VERSION into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "arize-phoenix==$PHOENIX_VERSION"
fi

# Build first, so that the time Phoenix waits is the examples' run, not the compiler's.
cargo build -q --features otlp --example traces --example long_session

WORK="$(mktemp -d)"
PHOENIX_PID=""
cleanup() {
  if [ -n "$PHOENIX_PID" ]; then
    kill "$PHOENIX_PID" 2>/dev/null || true
    wait "$PHOENIX_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT="$(free_port)"
GRPC_PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"

PHOENIX_WORKING_DIR="$WORK/phoenix" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$PORT" \
  PHOENIX_GRPC_PORT="$GRPC_PORT" PHOENIX_TELEMETRY_ENABLED=false \
  "$VENV/bin/phoenix" serve >"$WORK/phoenix.log" 2>&1 &
PHOENIX_PID=$!
for _ in $(seq 1 180); do
  if curl -fsS "$URL/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$PHOENIX_PID" 2>/dev/null; then
    echo "phoenix exited:"; cat "$WORK/phoenix.log"; exit 1
  fi
  sleep 1
done
curl -fsS "$URL/healthz" >/dev/null || { echo "phoenix did not start:"; cat "$WORK/phoenix.log"; exit 1; }
echo "phoenix $PHOENIX_VERSION up at $URL"

# A credential in the environment that must not reach any span.
SECRET="ghp_traceCheck$(python3 -c 'import secrets; print(secrets.token_hex(12))')"
run_example() {
  local example="$1" trace="$2"
  GITHUB_TOKEN="$SECRET" TROUPE_TRACE="$trace" TROUPE_TRACE_CONTENT=1 \
    OTEL_EXPORTER_OTLP_ENDPOINT="$URL" OTEL_METRICS_EXPORTER=none \
    cargo run -q --features otlp --example "$example" -- --scripted >"$WORK/$example.out" 2>&1 ||
    { echo "example $example failed (exit $?):"; cat "$WORK/$example.out"; exit 1; }
}
run_example traces "$WORK/traces.jsonl"
run_example long_session "$WORK/long_session.jsonl"

python3 scripts/trace_backend_check.py --url "$URL" --secret "$SECRET" \
  --team "$WORK/traces.jsonl" --compaction "$WORK/long_session.jsonl"

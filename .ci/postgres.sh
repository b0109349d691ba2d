#!/usr/bin/env bash
# Source this: starts a throwaway PostgreSQL (Debian's package) on a loopback port for the tests
# and exports its URL as TROUPE_TEST_POSTGRES; the server and its data directory go when the
# sourcing shell exits (`troupe_postgres_stop`, called from an EXIT trap). Installs the package
# when no server binary is found. initdb refuses to run as root: as root the server runs as the
# `postgres` user the package creates.
troupe_postgres_start() {
  # fsync off unless TROUPE_PG_FSYNC=on (the benchmark): the tests check troupe's commits, not the
  # disk under a throwaway server.
  local fsync="${TROUPE_PG_FSYNC:-off}"
  local bin
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "installing system packages: postgresql"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
    bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  fi
  TROUPE_PG_DIR="$(mktemp -d /tmp/troupe-pg.XXXXXX)"
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$TROUPE_PG_DIR"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$TROUPE_PG_DIR/data" -U troupe --auth=trust -E UTF8 \
    --no-sync >"$TROUPE_PG_DIR/initdb.log" 2>&1 \
    || { cat "$TROUPE_PG_DIR/initdb.log"; return 1; }
  # A free loopback port, asked of the kernel.
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "${as[@]}" "$bin/pg_ctl" -D "$TROUPE_PG_DIR/data" -l "$TROUPE_PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $TROUPE_PG_DIR -c fsync=$fsync -c max_connections=200" \
    start >/dev/null || { cat "$TROUPE_PG_DIR/server.log"; return 1; }
  TROUPE_PG_CTL=("${as[@]}" "$bin/pg_ctl")
  export TROUPE_TEST_POSTGRES="postgres://troupe@127.0.0.1:$port/postgres"
  echo "PostgreSQL ($bin) on 127.0.0.1:$port for the tests: TROUPE_TEST_POSTGRES=$TROUPE_TEST_POSTGRES"
}

troupe_postgres_stop() {
  if [ -n "${TROUPE_PG_DIR:-}" ]; then
    "${TROUPE_PG_CTL[@]}" -D "$TROUPE_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$TROUPE_PG_DIR"
    TROUPE_PG_DIR=
  fi
}

#!/usr/bin/env bash
# Starts a local PostgreSQL for Cairn's tests and benchmarks, and prints its URL.
# Idempotent: if a server already answers on 127.0.0.1:5432 it only makes sure the database
# exists. Otherwise it installs PostgreSQL from Debian when the binaries are missing, creates a
# cluster in ${CAIRN_PG_DIR:-/tmp/cairn-pg} owned by the postgres OS user (trust auth, listening
# on 127.0.0.1 only, fsync on as by default) and starts it.
set -euo pipefail

PG_DIR="${CAIRN_PG_DIR:-/tmp/cairn-pg}"
PG_HOST=127.0.0.1
PG_PORT=5432
PG_DB=cairn_test
URL="postgres://postgres@${PG_HOST}:${PG_PORT}/${PG_DB}"

log() { echo "pg-start: $*" >&2; }

answers() { (exec 3<>"/dev/tcp/${PG_HOST}/${PG_PORT}") 2>/dev/null; }

as_postgres() {
  if [ "$(id -un)" = postgres ]; then "$@"; return; fi
  if command -v runuser >/dev/null 2>&1; then runuser -u postgres -- "$@"; else su postgres -s /bin/bash -c "$(printf '%q ' "$@")"; fi
}

find_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
  done
  return 1
}

if ! answers; then
  if ! BIN="$(find_bindir)"; then
    log "installing PostgreSQL from Debian"
    # Debian's package would create and start a "main" cluster on port 5432; ours takes its place.
    mkdir -p /etc/postgresql-common
    if [ ! -f /etc/postgresql-common/createcluster.conf ] || ! grep -q '^create_main_cluster' /etc/postgresql-common/createcluster.conf; then
      echo "create_main_cluster = false" >>/etc/postgresql-common/createcluster.conf
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    apt-get install -y -q postgresql >&2
    BIN="$(find_bindir)" || { log "PostgreSQL installed but no initdb/pg_ctl under /usr/lib/postgresql/*/bin"; exit 1; }
  fi

  mkdir -p "$PG_DIR"
  chown postgres:postgres "$PG_DIR"
  chmod 700 "$PG_DIR"
  if [ ! -f "$PG_DIR/PG_VERSION" ]; then
    log "creating a cluster in $PG_DIR"
    as_postgres "$BIN/initdb" -D "$PG_DIR" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >&2 ||
      as_postgres "$BIN/initdb" -D "$PG_DIR" -U postgres -A trust -E UTF8 --locale=C >&2
    cat >>"$PG_DIR/postgresql.conf" <<CONF
# cairn: local test server
listen_addresses = '${PG_HOST}'
port = ${PG_PORT}
unix_socket_directories = '${PG_DIR}'
max_connections = 300
CONF
  fi
  # A copied or rebooted machine can carry the postmaster.pid of a server that no longer runs; if
  # that pid now belongs to another process, PostgreSQL refuses to start. No server answers here,
  # so a pid file whose process is not a postgres is stale.
  if [ -f "$PG_DIR/postmaster.pid" ]; then
    stale_pid="$(head -1 "$PG_DIR/postmaster.pid")"
    if ! ps -o comm= -p "$stale_pid" 2>/dev/null | grep -q postgres; then
      log "removing the stale postmaster.pid of process $stale_pid"
      rm -f "$PG_DIR/postmaster.pid"
    fi
  fi
  log "starting PostgreSQL ($BIN) in $PG_DIR"
  # Crash recovery of a large cluster can take minutes; waiting 60 s was not always enough.
  if ! as_postgres "$BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 300 start >&2; then
    log "PostgreSQL did not start; the end of $PG_DIR/server.log:"
    tail -n 30 "$PG_DIR/server.log" >&2 || true
    exit 1
  fi
fi

# The database, created once. psql talks to whichever server answers, ours or one already there.
PSQL="$(command -v psql || true)"
if [ -z "$PSQL" ] && BIN="$(find_bindir)"; then PSQL="$BIN/psql"; fi
for _ in $(seq 1 30); do
  if "$PSQL" -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -Atqc "SELECT 1" >/dev/null 2>&1; then break; fi
  sleep 1
done
if [ "$("$PSQL" -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = '${PG_DB}'")" != 1 ]; then
  "$PSQL" -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -qc "CREATE DATABASE ${PG_DB}" >&2
fi
echo "$URL"

#!/usr/bin/env bash
# Stops the PostgreSQL that scripts/pg-start.sh started (the cluster in ${CAIRN_PG_DIR:-/tmp/cairn-pg}).
set -euo pipefail

PG_DIR="${CAIRN_PG_DIR:-/tmp/cairn-pg}"

if [ ! -f "$PG_DIR/postmaster.pid" ]; then
  echo "pg-stop: no server running in $PG_DIR" >&2
  exit 0
fi
BIN=""
for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  if [ -x "$dir/pg_ctl" ]; then BIN="$dir"; break; fi
done
[ -n "$BIN" ] || { echo "pg-stop: pg_ctl not found under /usr/lib/postgresql/*/bin" >&2; exit 1; }
if [ "$(id -un)" = postgres ]; then
  "$BIN/pg_ctl" -D "$PG_DIR" -m fast -w stop
elif command -v runuser >/dev/null 2>&1; then
  runuser -u postgres -- "$BIN/pg_ctl" -D "$PG_DIR" -m fast -w stop
else
  su postgres -s /bin/bash -c "'$BIN/pg_ctl' -D '$PG_DIR' -m fast -w stop"
fi

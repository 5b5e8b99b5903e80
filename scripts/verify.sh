#!/usr/bin/env bash
# `npm run verify`: everything a change must pass, in one command — build, types (src, test and
# tools), lint (eslint, then prettier --check: the formatting is part of lint), then every test on
# both backends. Starts a local PostgreSQL unless CAIRN_TEST_POSTGRES_URL names one already, or
# CAIRN_SKIP_POSTGRES=1 asks for SQLite alone. Arguments go to vitest (a file, -t "name").
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${CAIRN_TEST_POSTGRES_URL:-}" ] && [ "${CAIRN_SKIP_POSTGRES:-0}" != 1 ]; then
  CAIRN_TEST_POSTGRES_URL="$(bash scripts/pg-start.sh)"
  export CAIRN_TEST_POSTGRES_URL
fi

# Crash and fuzz tests spawn workers that import dist/, so the build comes first.
npm run build --silent
npm run typecheck --silent
npm run lint --silent
mkdir -p .tmp
status=0
npx vitest run --reporter=default --reporter=json --outputFile=.tmp/vitest.json "$@" || status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(".tmp/vitest.json", "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status

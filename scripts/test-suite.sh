#!/usr/bin/env bash
# One leg of the test matrix, on the node and AI SDK found here: build, type-check, lint, then every
# test on both backends. Starts (and, where absent, installs) a local PostgreSQL unless
# CAIRN_TEST_POSTGRES_URL names one already, or CAIRN_SKIP_POSTGRES=1 asks for SQLite alone.
# CAIRN_TSCONFIG / CAIRN_TSCONFIG_BUILD name other tsconfigs (the AI SDK 7 legs leave out the
# bench and experiment tools, which are written against ai@6, the devDependency).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${CAIRN_TEST_POSTGRES_URL:-}" ] && [ "${CAIRN_SKIP_POSTGRES:-0}" != 1 ]; then
  CAIRN_TEST_POSTGRES_URL="$(bash scripts/pg-start.sh)"
  export CAIRN_TEST_POSTGRES_URL
fi

npx tsc -p "${CAIRN_TSCONFIG_BUILD:-tsconfig.build.json}"
npx tsc -p "${CAIRN_TSCONFIG:-tsconfig.json}" --noEmit
npm run lint --silent
mkdir -p .tmp
status=0
npx vitest run --reporter=default --reporter=json --outputFile=.tmp/vitest.json "$@" || status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(".tmp/vitest.json", "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status

#!/usr/bin/env bash
# `npm run verify`, and one leg of the test matrix (scripts/test-matrix.sh) on the Node and AI SDK
# found here: everything a change must pass, in one command — build, types (src, test and tools),
# lint (eslint, then prettier --check: the formatting is part of lint), then every test on both
# backends. Starts (and, where absent, installs) a local PostgreSQL unless CAIRN_TEST_POSTGRES_URL
# names one already, or CAIRN_SKIP_POSTGRES=1 asks for SQLite alone. Arguments go to vitest (a
# file, -t "name").
# CAIRN_TSC_TOLERATE: a path pattern (grep -E) whose type errors are reported but not fatal — the
# AI SDK 7 legs set it to the bench and experiment tools, which are written against ai@6 (the
# devDependency) and run on the node20 leg; tsc still emits them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${CAIRN_TEST_POSTGRES_URL:-}" ] && [ "${CAIRN_SKIP_POSTGRES:-0}" != 1 ]; then
  CAIRN_TEST_POSTGRES_URL="$(bash scripts/pg-start.sh)"
  export CAIRN_TEST_POSTGRES_URL
fi

# Runs tsc; with CAIRN_TSC_TOLERATE, fails only on errors in files outside that pattern.
typescript() {
  if [ -z "${CAIRN_TSC_TOLERATE:-}" ]; then npx tsc "$@"; return; fi
  local out
  out="$(npx tsc "$@" 2>&1)" || true
  if [ -n "$out" ]; then echo "$out" | grep -E "^[^ ].*error TS" | sed 's/^/tolerated? /' >&2; fi
  if echo "$out" | grep -E "^[^ ].*error TS" | grep -Ev "^(${CAIRN_TSC_TOLERATE})" >&2; then return 1; fi
}
# Crash and fuzz tests spawn workers that import dist/, so the build comes first.
typescript -p tsconfig.build.json
typescript -p tsconfig.json --noEmit
npm run lint --silent
mkdir -p .tmp
rm -f .tmp/vitest.json .tmp/failures.txt
status=0
npx vitest run --reporter=default --reporter=json --outputFile=.tmp/vitest.json "$@" || status=$?
# The count, and each failed test with the first line of its failure into .tmp/failures.txt: the
# matrix repeats them at its very end, where a CI log's tail shows them.
node -e '
  const fs = require("fs");
  const r = JSON.parse(fs.readFileSync(".tmp/vitest.json", "utf8"));
  const failures = [];
  for (const file of r.testResults) {
    const where = require("path").relative(process.cwd(), file.name);
    for (const t of file.assertionResults) {
      if (t.status !== "failed") continue;
      const first = (t.failureMessages[0] ?? "").split("\n").find((l) => l.trim() !== "") ?? "";
      failures.push(`FAILED ${where} > ${t.fullName}: ${first.slice(0, 400)}`);
    }
    if (file.status === "failed" && file.assertionResults.length === 0) failures.push(`FAILED ${where}: ${(file.message ?? "").slice(0, 400)}`);
  }
  fs.writeFileSync(".tmp/failures.txt", failures.map((l) => l + "\n").join(""));
  for (const line of failures) console.log(line);
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status

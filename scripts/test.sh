#!/usr/bin/env bash
# The one gate (`npm test`, run by .ci/run): the support matrix of scripts/test-matrix.sh — Node 20
# with AI SDK 6, Node 22 and Node 24 with AI SDK 7. CAIRN_MATRIX=node20 (or a comma-separated list
# of legs) runs fewer; extra arguments go to vitest and imply the node20 leg alone (as before).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then exec bash scripts/verify.sh "$@"; fi
if [ -z "${CAIRN_TEST_POSTGRES_URL:-}" ] && [ "${CAIRN_SKIP_POSTGRES:-0}" != 1 ]; then
  CAIRN_TEST_POSTGRES_URL="$(bash scripts/pg-start.sh)"
  export CAIRN_TEST_POSTGRES_URL
fi
IFS=, read -r -a legs <<< "${CAIRN_MATRIX:-node20,node22,node24}"
exec bash scripts/test-matrix.sh "${legs[@]}"

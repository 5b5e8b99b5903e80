#!/usr/bin/env bash
# The consumer test (part of the node22 matrix leg, scripts/test-matrix.sh): an application that
# installs the PACKED cairn next to ai@7 on the node found on PATH. It must end with one copy of `ai`
# in its tree (`npm ls ai`: cairn's ai is a peer, so it is the application's), and an agent must run
# through a SIGKILL of its process and finish without calling the model again for the call it
# already made (consumer/driver.mjs). Needs the registry (or the npm cache, which a matrix run fills).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
work="$(mktemp -d "${TMPDIR:-/tmp}/cairn-consumer-XXXXXX")"
trap 'rm -rf "$work"' EXIT
log() { echo "consumer: $*" >&2; }

# The package as published: `npm pack` of the built dist/ (built by the leg already).
tarball="$(npm pack --ignore-scripts --silent --pack-destination "$work")"
log "packed $tarball on node $(node --version)"
mkdir -p "$work/app"
cp test/package/consumer/app.mjs test/package/consumer/driver.mjs "$work/app/"
cat > "$work/app/package.json" <<JSON
{ "name": "cairn-consumer", "private": true, "type": "module",
  "dependencies": { "cairn": "file:../$tarball", "ai": "^7.0.173", "@ai-sdk/provider": "^4.0.38" } }
JSON
cd "$work/app"
npm install --no-audit --no-fund >&2

# Exactly one `ai` in the tree, and it is the application's ai@7.
npm ls ai --all --json > ls.json || true
node -e '
  const tree = JSON.parse(require("fs").readFileSync("ls.json", "utf8"));
  const copies = new Set();
  (function walk(deps) {
    for (const [name, dep] of Object.entries(deps ?? {})) {
      if (name === "ai" && dep.version !== undefined) copies.add(dep.resolved ?? dep.version);
      walk(dep.dependencies);
    }
  })(tree.dependencies);
  const ai = require("ai/package.json").version;
  if (copies.size !== 1 || !ai.startsWith("7.")) { console.error("ai copies:", [...copies], "installed:", ai); process.exit(1); }
  console.error(`consumer: one copy of ai (${ai})`);
'
npm ls ai >&2
node driver.mjs
log "ok"

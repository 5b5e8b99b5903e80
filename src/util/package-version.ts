import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Cairn's own version, from the nearest package.json named "cairn" above this file. Walked up rather
 * than read at a fixed relative path because the same sources are compiled to different depths
 * (dist/ for the package, .tmp/tools/src/ for the benchmarks and the experiment).
 */
export function cairnVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "cairn" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // No package.json here (or an unreadable one): keep walking up.
    }
    const parent = dirname(dir);
    if (parent === dir) return "0.0.0";
    dir = parent;
  }
}

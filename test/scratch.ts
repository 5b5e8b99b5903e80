import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject } from "vitest";

/**
 * Where the tests put what they create: every temporary folder under one root per test run, and
 * every PostgreSQL database under one name prefix per run. test/global-setup.ts makes the root and
 * the prefix before the first test file and removes both (the folder, and every database whose
 * name starts with the prefix) after the last: one place cleans up, even after a test that failed
 * half-way, and one batch of DROP DATABASE costs the shared server far less than one per test.
 */
export interface ScratchSpace {
  /** A folder for this run's temporary folders (created by the global setup). */
  root: string;
  /** The prefix of this run's PostgreSQL databases, e.g. `cairn_t_3fa9c2d1_`. */
  databasePrefix: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    cairnScratch: ScratchSpace;
  }
}

/** This run's scratch space; outside `vitest run` with the repository's config, an unmanaged one. */
const space: ScratchSpace = (() => {
  try {
    const provided = inject("cairnScratch");
    if (provided !== undefined) return provided;
  } catch {
    // Not inside a vitest worker.
  }
  return { root: tmpdir(), databasePrefix: `cairn_t_${randomBytes(4).toString("hex")}_` };
})();

/** A new, empty folder (`prefix` names it for whoever looks at the disk), removed after the run. */
export function scratchDir(prefix: string): string {
  return mkdtempSync(join(space.root, prefix));
}

/** A new PostgreSQL database name, in this run's prefix so that it is dropped after the run. */
export function scratchDatabaseName(): string {
  return `${space.databasePrefix}${randomBytes(8).toString("hex")}`;
}

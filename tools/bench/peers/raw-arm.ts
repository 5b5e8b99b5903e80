import { rawPostgresSequential, rawSqliteSequential } from "../raw-floors.js";
import type { ScratchDatabase } from "../scratch-databases.js";
import { STEPS_PER_RUN, type Arm, type Backend } from "./workload.js";

/**
 * The floor: `npm run bench`'s raw loop (one journal-shaped row per autocommit transaction, with
 * the durability Cairn asks for), as many rows as the runs have steps. No engine records
 * sequential steps faster than its database commits them one at a time; the concurrent runs are
 * compared with this same sequential floor.
 */
export function rawArm(backend: Backend, fresh: () => Promise<ScratchDatabase>): Arm {
  return {
    name: backend === "sqlite" ? "raw-sqlite" : "raw-postgres",
    backend,
    durability: backend === "sqlite" ? "WAL, synchronous=FULL" : "synchronous_commit=on (server default)",
    modes: ["sequential"],
    async measure(runs) {
      const scratch = await fresh();
      try {
        const rows = runs * STEPS_PER_RUN;
        const timing = backend === "sqlite" ? rawSqliteSequential(scratch.database, rows) : await rawPostgresSequential(scratch.database, rows);
        return { steps: timing.operations, wallMs: timing.elapsedMs, runLatenciesMs: [] };
      } finally {
        await scratch.dispose();
      }
    },
  };
}

import { Cairn } from "../../../src/index.js";
import type { ScratchDatabase } from "../scratch-databases.js";
import { driveRuns, expectCount, expectLastStep, stepValue, STEPS_PER_RUN, type Arm, type Backend, type StepValue } from "./workload.js";
import { storeOf } from "../../internal.js";

/**
 * Cairn through its public API with default options, as an application runs it: `wf.start` then
 * `run.result()` per run, each step a `ctx.step` (committed before the workflow sees its value).
 */
export function cairnArm(backend: Backend, fresh: () => Promise<ScratchDatabase>): Arm {
  return {
    name: backend === "sqlite" ? "cairn-sqlite" : "cairn-postgres",
    backend,
    durability: backend === "sqlite" ? "WAL, synchronous=FULL (default)" : "synchronous_commit=on (server default)",
    modes: ["sequential", "concurrent"],
    async measure(runs, inFlight) {
      const scratch = await fresh();
      const errors: unknown[] = [];
      const cairn = new Cairn({ database: scratch.database, onError: (error) => errors.push(error) });
      try {
        const workflow = cairn.workflow("peers-bench", async (ctx, steps: number) => {
          let last: StepValue | undefined;
          for (let i = 0; i < steps; i++) last = await ctx.step("step", () => stepValue(i));
          return last;
        });
        await cairn.launch();
        const timing = await driveRuns(runs, inFlight, async (index) => {
          const id = `run-${index}`;
          expectLastStep(await (await workflow.start(STEPS_PER_RUN, { id })).result(), id);
        });
        const store = storeOf(cairn);
        expectCount("step rows", (await store.query("SELECT count(*) AS n FROM cairn_steps")).rows[0]?.n, runs * STEPS_PER_RUN);
        expectCount("succeeded runs", (await store.query("SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'")).rows[0]?.n, runs);
        if (errors.length > 0) throw new Error(`Cairn reported ${errors.length} background error(s)`, { cause: errors[0] });
        return timing;
      } finally {
        await cairn.shutdown();
        await scratch.dispose();
      }
    },
  };
}

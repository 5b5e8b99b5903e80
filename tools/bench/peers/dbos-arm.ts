import { DBOS } from "@dbos-inc/dbos-sdk";
import pg from "pg";
import type { ScratchDatabase } from "../scratch-databases.js";
import { driveRuns, expectCount, expectLastStep, stepValue, STEPS_PER_RUN, type Arm, type StepValue } from "./workload.js";

/**
 * DBOS Transact with its system database on a fresh PostgreSQL database (no application
 * database): a workflow registered with `DBOS.registerWorkflow` whose steps are `DBOS.runStep`,
 * each checkpointed in `dbos.operation_outputs` before the workflow goes on. Runs are started with
 * `DBOS.startWorkflow` and awaited with `handle.getResult()`, as Cairn's are with `start` and
 * `result`. Everything else is DBOS's default (a pool of 10, as Cairn's).
 *
 * DBOS is a process-wide singleton: each measurement registers the workflow, launches, and shuts
 * down with `deregister`, which clears the registry so the next measurement can register again.
 */
export function dbosArm(fresh: () => Promise<ScratchDatabase>): Arm {
  return {
    name: "dbos-postgres",
    backend: "postgres",
    durability: "synchronous_commit=on (server default)",
    modes: ["sequential", "concurrent"],
    async measure(runs, inFlight) {
      const scratch = await fresh();
      try {
        const workflow = DBOS.registerWorkflow(
          async (steps: number) => {
            let last: StepValue | undefined;
            for (let i = 0; i < steps; i++) last = await DBOS.runStep(async () => stepValue(i), { name: "step" });
            return last;
          },
          { name: "peers-bench" },
        );
        DBOS.setConfig({ name: "cairn-peers", systemDatabaseUrl: scratch.database, logLevel: "error" });
        await DBOS.launch();
        try {
          const timing = await driveRuns(runs, inFlight, async (index) => {
            const id = `run-${index}`;
            const handle = await DBOS.startWorkflow(workflow, { workflowID: id })(STEPS_PER_RUN);
            expectLastStep(await handle.getResult(), id);
          });
          await expectRows(scratch.database, runs);
          return timing;
        } finally {
          await DBOS.shutdown({ deregister: true });
        }
      } finally {
        await scratch.dispose();
      }
    },
  };
}

async function expectRows(url: string, runs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    const steps = await client.query<{ n: string }>("SELECT count(*) AS n FROM dbos.operation_outputs");
    expectCount("DBOS step checkpoints", steps.rows[0]?.n, runs * STEPS_PER_RUN);
    const done = await client.query<{ n: string }>("SELECT count(*) AS n FROM dbos.workflow_status WHERE status = 'SUCCESS'");
    expectCount("successful DBOS workflows", done.rows[0]?.n, runs);
  } finally {
    await client.end();
  }
}

import { parseArgs } from "node:util";
import { Cairn } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "./scratch-databases.js";
import { renderTable } from "./stats.js";

/**
 * `npm run build:tools && node --expose-gc .tmp/tools/tools/bench/run-memory.js [--runs 4000] [--backend sqlite|postgres] [--postgres <url>]`
 *
 * What a run costs in the executor's memory, counted rather than timed: the heap after full
 * collections, before and after, divided by the runs (deterministic to about 1%, unlike the
 * wall-clock figures of a shared machine). Runs sleep once on a ManualClock.
 * - in flight: `runs` runs woken from their sleep and held inside their body (a gate they await),
 *   none kept warm — what thousands of runs waking together hold at once.
 * - parked (warm): `runs` runs unloaded on their sleep with `warmRuns.maxRuns` ≥ `runs`, so each
 *   stays in memory for a warm continuation (README, "Warm runs": what the cache costs).
 * - waiting (cold): the same with `maxRuns: 0` — what "waiting costs no memory" leaves.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";

function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with node --expose-gc: the heap is measured after full collections");
  for (let i = 0; i < 4; i++) gc();
  return process.memoryUsage().heapUsed;
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const by = Date.now() + 300_000;
  while (!(await check())) {
    if (Date.now() > by) throw new Error(`${what} within 5 minutes`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function countWaiting(cairn: Cairn): Promise<number> {
  return Number((await cairn.query("SELECT count(*) AS n FROM cairn_runs WHERE status = 'waiting'")).rows[0]?.n);
}

interface Sleepers {
  startMany(starts: { input: number; options: { id: string } }[]): Promise<unknown>;
}

async function startSleepers(workflow: Sleepers, runs: number): Promise<void> {
  for (let at = 0; at < runs; at += 500) {
    const size = Math.min(500, runs - at);
    await workflow.startMany(Array.from({ length: size }, (_, i) => ({ input: at + i, options: { id: `m-${at + i}` } })));
  }
}

/** Bytes per run held inside its body after waking (nothing kept warm). */
async function inFlight(database: string, runs: number): Promise<number> {
  const clock = new ManualClock(Date.now());
  const cairn = new Cairn({ database, clock, maxConcurrentRuns: runs + 10, warmRuns: { maxRuns: 0 } });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  try {
    const workflow = cairn.workflow("memory-in-flight", async (ctx, n: number) => {
      await ctx.sleep("nap", 5_000);
      held++;
      await gate;
      return n;
    });
    await cairn.launch();
    await startSleepers(workflow, runs);
    await until(async () => (await countWaiting(cairn)) >= runs, "the runs did not all go to sleep");
    const before = heapAfterGc();
    clock.advance(5_000);
    await until(async () => held >= runs, "the runs did not all wake");
    const after = heapAfterGc();
    return (after - before) / runs;
  } finally {
    release();
    await cairn.shutdown();
  }
}

/** Bytes per run unloaded on its sleep, kept warm (`maxRuns` ≥ runs) or not (`maxRuns: 0`). */
async function waiting(database: string, runs: number, maxRuns: number): Promise<number> {
  const cairn = new Cairn({ database, clock: new ManualClock(Date.now()), maxConcurrentRuns: runs + 10, warmRuns: { maxRuns } });
  try {
    const workflow = cairn.workflow("memory-waiting", async (ctx, n: number) => {
      await ctx.sleep("nap", 5_000);
      return n;
    });
    await cairn.launch();
    // One run first, so that what every run shares (compiled code, statements) is in the baseline.
    await workflow.startMany([{ input: -1, options: { id: "first" } }]);
    await until(async () => (await countWaiting(cairn)) >= 1, "the first run did not go to sleep");
    const before = heapAfterGc();
    await startSleepers(workflow, runs);
    await until(async () => (await countWaiting(cairn)) >= runs + 1, "the runs did not all go to sleep");
    await new Promise((resolve) => setTimeout(resolve, 300));
    return (heapAfterGc() - before) / runs;
  } finally {
    await cairn.shutdown();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "4000" },
      backend: { type: "string" },
      postgres: { type: "string" },
    },
  });
  const runs = Number(values.runs);
  const plans: { backend: string; fresh: () => Promise<ScratchDatabase> }[] = [];
  if (values.backend !== "postgres") plans.push({ backend: "sqlite", fresh: async () => scratchSqlite() });
  if (values.backend !== "sqlite") {
    const postgres = await ScratchPostgres.connect(values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES);
    if ("server" in postgres) plans.push({ backend: "postgres", fresh: () => postgres.server.fresh() });
    else process.stderr.write(`PostgreSQL skipped: ${postgres.unreachable}\n`);
  }
  const rows: string[][] = [];
  for (const plan of plans) {
    const inFresh = async (fn: (database: string) => Promise<number>): Promise<string> => {
      const scratch = await plan.fresh();
      try {
        return Math.round(await fn(scratch.database)).toLocaleString("en-US");
      } finally {
        await scratch.dispose();
      }
    };
    rows.push([
      plan.backend,
      await inFresh((db) => inFlight(db, runs)),
      await inFresh((db) => waiting(db, runs, runs)),
      await inFresh((db) => waiting(db, runs, 0)),
    ]);
  }
  console.log(`\nHeap per run, ${runs.toLocaleString("en-US")} runs each sleeping once (bytes, after full collections)\n`);
  console.log(renderTable([["backend", "in flight", "parked (warm)", "waiting (cold)"], ...rows]));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

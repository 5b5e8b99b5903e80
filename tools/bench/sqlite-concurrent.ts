import { parseArgs } from "node:util";
import { Cairn } from "../../src/index.js";
import { rawSqliteGroupCommit } from "./raw-floors.js";
import { scratchSqlite } from "./scratch-databases.js";
import { driveRuns, stepValue, STEPS_PER_RUN } from "./peers/workload.js";

/**
 * `npm run build:tools && node .tmp/tools/tools/bench/sqlite-concurrent.js [--runs 3000] [--in-flight 16] [--rounds 3]`
 *
 * What bounds Cairn on SQLite with runs in flight (issue 13 asks ≥ 80,000 steps/s with 16): the
 * `bench:peers` workload (runs of 10 steps, `--in-flight` at a time) measured with the default
 * `synchronous=FULL` and with `synchronous=OFF`, alternated in each round on fresh files. Each
 * line gives steps/s, the process's CPU and the wall time per step. better-sqlite3 commits on the
 * main thread, so the fsync of each group commit stops the event loop: wall time per step at FULL
 * minus at OFF is what the fsyncs cost the thread; what is left at OFF is the engine's JavaScript
 * and SQLite's own work (CPU above wall is V8's helper threads: GC).
 *
 * Beside each, the raw floor on the same settings (raw-floors.ts, `rawSqliteGroupCommit`): as many
 * clients as runs in flight, each committing journal rows one after another and waiting for each,
 * group committed at each turn of the event loop as Cairn's commits are, with nothing else to do.
 * At FULL every row waits for an fsync that began after it was asked for, so no engine reaches
 * more than that floor with this many in flight: it is the ceiling the goal has to fit under.
 * (Cairn's runs also commit a start and a finish each — 12 commits per 10 steps — counted as steps
 * are not.)
 */

type Synchronous = "FULL" | "OFF";

interface Measured {
  stepsPerSecond: number;
  cpuUsPerStep: number;
  wallUsPerStep: number;
}

async function measure(synchronous: Synchronous, runs: number, inFlight: number): Promise<Measured> {
  const scratch = scratchSqlite();
  const cairn = new Cairn({ database: scratch.database, synchronous });
  try {
    const workflow = cairn.workflow("sqlite-concurrent", async (ctx, steps: number) => {
      let last: unknown;
      for (let i = 0; i < steps; i++) last = await ctx.step("step", () => stepValue(i));
      return last;
    });
    await cairn.launch();
    const runAll = (prefix: string, total: number) =>
      driveRuns(total, inFlight, async (index) => {
        await (await workflow.start(STEPS_PER_RUN, { id: `${prefix}-${index}` })).result();
      });
    await runAll("warm", Math.min(runs, 500));
    const cpu0 = process.cpuUsage();
    const { wallMs } = await runAll("run", runs);
    const cpu = process.cpuUsage(cpu0);
    const steps = runs * STEPS_PER_RUN;
    return { stepsPerSecond: (steps * 1000) / wallMs, cpuUsPerStep: (cpu.user + cpu.system) / steps, wallUsPerStep: (wallMs * 1000) / steps };
  } finally {
    await cairn.shutdown();
    await scratch.dispose();
  }
}

/** The raw group-commit floor: rows/s, as many clients as runs in flight, runs of as many rows as Cairn's have steps. */
async function measureRaw(synchronous: Synchronous, runs: number, inFlight: number): Promise<number> {
  const scratch = scratchSqlite();
  try {
    const timing = await rawSqliteGroupCommit(scratch.database, inFlight, runs, STEPS_PER_RUN, synchronous === "FULL");
    return (timing.operations * 1000) / timing.elapsedMs;
  } finally {
    await scratch.dispose();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "3000" },
      "in-flight": { type: "string", default: "16" },
      rounds: { type: "string", default: "3" },
    },
  });
  const runs = Number(values.runs);
  const inFlight = Number(values["in-flight"]);
  const rounds = Number(values.rounds);
  if (![runs, inFlight, rounds].every((n) => Number.isInteger(n) && n > 0)) throw new Error("--runs, --in-flight and --rounds take integers > 0");
  console.log(`SQLite, ${runs} runs of ${STEPS_PER_RUN} steps, ${inFlight} in flight; Node ${process.version}`);
  for (let round = 1; round <= rounds; round++) {
    // Alternate the order, so neither setting always runs on a warmer machine.
    const order: Synchronous[] = round % 2 === 1 ? ["FULL", "OFF"] : ["OFF", "FULL"];
    const results = new Map<Synchronous, Measured>();
    const raw = new Map<Synchronous, number>();
    for (const synchronous of order) {
      results.set(synchronous, await measure(synchronous, runs, inFlight));
      raw.set(synchronous, await measureRaw(synchronous, runs, inFlight));
    }
    for (const synchronous of ["FULL", "OFF"] as const) {
      const m = results.get(synchronous)!;
      const floor = raw.get(synchronous)!;
      console.log(
        `round ${round} synchronous=${synchronous.padEnd(4)} ${Math.round(m.stepsPerSecond).toLocaleString("en-US").padStart(7)} steps/s, ` +
          `CPU ${m.cpuUsPerStep.toFixed(1)} µs/step, wall ${m.wallUsPerStep.toFixed(1)} µs/step; ` +
          `raw floor ${Math.round(floor).toLocaleString("en-US")} rows/s (Cairn ${(m.stepsPerSecond / floor).toFixed(2)}× of it)`,
      );
    }
    const full = results.get("FULL")!;
    const off = results.get("OFF")!;
    console.log(
      `round ${round} the fsyncs' share of the thread: ${(full.wallUsPerStep - off.wallUsPerStep).toFixed(1)} µs/step of ${full.wallUsPerStep.toFixed(1)}`,
    );
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

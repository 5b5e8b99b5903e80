import { parseArgs } from "node:util";
import { Cairn } from "../../src/index.js";
import { runtimeOf } from "../internal.js";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "./scratch-databases.js";

/**
 * `npm run bench:warm [-- --sleeps 500] [-- --steps 100] [-- --postgres <url>]`
 *
 * A run that sleeps often: `sleeps` segments of `steps` sequential steps, each followed by a short
 * `ctx.sleep` that unloads the run (the executor wakes it, as any timer). Three arms, one fresh
 * database each: the same steps without the sleeps; with the sleeps and warm runs on (the default:
 * the run continues from memory after each wake-up); with the sleeps and warm runs off
 * (`warmRuns: { maxRuns: 0 }`: each wake-up replays the whole journal, so the time grows with the
 * square of the sleeps). The goal: warm within 1.5× of the run without sleeps. "awake" is the total
 * less the time asleep (sleeps × sleep-ms): what the engine spent, which the ratio is taken on.
 */

const USAGE = `usage: npm run bench:warm -- [--sleeps <n>] [--steps <n>] [--sleep-ms <n>] [--postgres <url>] [--skip-cold]
  --sleeps <n>      sleeps per run (default 500)
  --steps <n>       steps between two sleeps (default 100)
  --sleep-ms <n>    each sleep's length (default 2; a sleep that is over before its start is
                    committed ends in memory without unloading, so keep it above a commit's latency)
  --postgres <url>  measure on a scratch database on this server too
  --skip-cold       leave out the arm without warm runs (it takes about a minute at the defaults)`;

interface Arm {
  name: string;
  sleeps: boolean;
  maxRuns: number;
}

interface Measured {
  arm: string;
  totalMs: number;
  /** The first and last segment (its steps, and the wake-up before it). */
  firstSegmentMs: number;
  lastSegmentMs: number;
  /** How many times the workflow function was entered: 1 live, plus one per replay. */
  entered: number;
  /** How many sleeps unloaded the run (the others were over before their start was committed). */
  unloads: number;
}

async function measure(database: string, arm: Arm, sleeps: number, steps: number, sleepMs: number): Promise<Measured> {
  const errors: unknown[] = [];
  const cairn = new Cairn({ database, onError: (error) => errors.push(error), warmRuns: { maxRuns: arm.maxRuns } });
  const segments: number[] = [];
  let entered = 0;
  // Counted where the executor hears that a run unloaded (a sleep over before its start was
  // committed ends in memory instead, and measures nothing).
  let unloads = 0;
  const executor = (runtimeOf(cairn) as unknown as { executor: { released: (runId: string, reason: string, ...rest: unknown[]) => void } }).executor;
  const released = executor.released.bind(executor);
  executor.released = (runId, reason, ...rest) => {
    if (reason === "suspended") unloads++;
    released(runId, reason, ...rest);
  };
  try {
    const wf = cairn.workflow("bench-warm", async (ctx, input: { sleeps: number; steps: number; sleepMs: number }) => {
      entered++;
      let mark = performance.now();
      for (let s = 0; s < input.sleeps; s++) {
        for (let i = 0; i < input.steps; i++) await ctx.step("step", () => i);
        if (input.sleepMs > 0) await ctx.sleep("nap", input.sleepMs);
        // Only the live pass counts (a replay re-enters earlier segments in no time).
        if (!ctx.isReplaying) {
          const now = performance.now();
          segments[s] = now - mark;
          mark = now;
        }
      }
      return input.sleeps * input.steps;
    });
    await cairn.launch();
    const begin = performance.now();
    await (await wf.start({ sleeps, steps, sleepMs: arm.sleeps ? sleepMs : 0 }, { id: "warm" })).result();
    const totalMs = performance.now() - begin;
    if (errors.length > 0) throw new Error(`Cairn reported ${errors.length} background error(s)`, { cause: errors[0] });
    return { arm: arm.name, totalMs, firstSegmentMs: segments[0] ?? NaN, lastSegmentMs: segments[sleeps - 1] ?? NaN, entered, unloads };
  } finally {
    await cairn.shutdown();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      sleeps: { type: "string", default: "500" },
      steps: { type: "string", default: "100" },
      "sleep-ms": { type: "string", default: "2" },
      postgres: { type: "string" },
      "skip-cold": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const sleeps = Number(values.sleeps);
  const steps = Number(values.steps);
  const sleepMs = Number(values["sleep-ms"]);
  if (!Number.isInteger(sleeps) || sleeps < 1 || !Number.isInteger(steps) || steps < 1) throw new Error(USAGE);
  const arms: Arm[] = [
    { name: "no sleeps", sleeps: false, maxRuns: 100 },
    { name: "sleeps, warm runs on", sleeps: true, maxRuns: 100 },
    ...(values["skip-cold"] ? [] : [{ name: "sleeps, warm runs off", sleeps: true, maxRuns: 0 }]),
  ];
  const backends: { name: string; fresh: () => Promise<ScratchDatabase> }[] = [{ name: "sqlite", fresh: async () => scratchSqlite() }];
  if (values.postgres !== undefined) {
    const connected = await ScratchPostgres.connect(values.postgres);
    if ("unreachable" in connected) throw new Error(`PostgreSQL unreachable: ${connected.unreachable}`);
    backends.push({ name: "postgres", fresh: () => connected.server.fresh() });
  }
  console.log(`${sleeps} sleeps × ${steps} steps per run`);
  for (const backend of backends) {
    let baseline = NaN;
    for (const arm of arms) {
      const scratch = await backend.fresh();
      try {
        const m = await measure(scratch.database, arm, sleeps, steps, sleepMs);
        const awakeMs = m.totalMs - (arm.sleeps ? sleeps * sleepMs : 0);
        if (!arm.sleeps) baseline = awakeMs;
        console.log(
          `${backend.name.padEnd(9)} ${m.arm.padEnd(22)} total ${(m.totalMs / 1000).toFixed(2).padStart(7)} s, awake ` +
            `${(awakeMs / 1000).toFixed(2).padStart(7)} s = ${(awakeMs / baseline).toFixed(2)}× no sleeps; segment first ` +
            `${m.firstSegmentMs.toFixed(1)} ms, last ${m.lastSegmentMs.toFixed(1)} ms; ${m.unloads} unloads, workflow entered ${m.entered}×`,
        );
      } finally {
        await scratch.dispose();
      }
    }
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

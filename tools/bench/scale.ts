import { Session } from "node:inspector/promises";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Cairn } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { storeOf } from "../internal.js";
import { scratchSqlite, ScratchPostgres, type ScratchDatabase } from "./scratch-databases.js";
import { percentile, renderTable } from "./stats.js";

/**
 * `npm run bench:scale [-- --runs <n>] [-- --chunk <n>] [-- --executors <n>] [-- --postgres <url>] [-- --json]`
 *
 * Work as it grows, on both backends (a fresh database per arm):
 * - starts: `runs` runs started by a client (no executor), in chunks of `chunk` — each chunk as
 *   `chunk` concurrent `start()` calls, and as one `startMany()`. Runs/s over the whole population.
 * - wake-up: `runs` runs each sleeping 5 s on a ManualClock, every one of them unloaded, then the
 *   clock jumps 5 s and they all fall due at once. A run's wake latency is the real time from the
 *   jump to its body running past the sleep (claim, journal load, replay); p50 / p99 / max over all.
 *   `executors` Cairns in this process share the database (each a separate executor).
 *   `--profile <dir>` writes the CPU profile of the wake-up alone (jump to last finish) to
 *   `<dir>/wake-<backend>.cpuprofile`, for where the time goes.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";
const SLEEP_MS = 5_000;

interface StartsResult {
  backend: string;
  method: "start" | "startMany";
  runs: number;
  runsPerSecond: number;
}

interface WakeResult {
  backend: string;
  runs: number;
  executors: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** From the jump to the last run's end. */
  allFinishedMs: number;
  /** This process's CPU time (user + system) over the same span: what the wake-up cost, load aside. */
  cpuMs: number;
}

async function starts(database: string, backend: string, method: StartsResult["method"], runs: number, chunk: number): Promise<StartsResult> {
  const cairn = new Cairn({ database });
  try {
    const wf = cairn.workflow("bench-start", async (_ctx, n: number) => n);
    await storeOf(cairn).migrate();
    const t0 = performance.now();
    for (let at = 0; at < runs; at += chunk) {
      const size = Math.min(chunk, runs - at);
      if (method === "start") await Promise.all(Array.from({ length: size }, (_, i) => wf.start(at + i, { id: `s-${at + i}` })));
      else await wf.startMany(Array.from({ length: size }, (_, i) => ({ input: at + i, options: { id: `s-${at + i}` } })));
    }
    const seconds = (performance.now() - t0) / 1000;
    await expectCount(cairn, "SELECT count(*) AS n FROM cairn_runs WHERE status = 'enqueued'", runs);
    return { backend, method, runs, runsPerSecond: runs / seconds };
  } finally {
    await cairn.shutdown();
  }
}

async function wake(database: string, backend: string, runs: number, executors: number, chunk: number, profileDir?: string): Promise<WakeResult> {
  const clock = new ManualClock(Date.now());
  const latencies: number[] = [];
  let jumpedAt = Infinity;
  let finished = 0;
  let lastFinish = 0;
  const errors: unknown[] = [];
  const cairns = Array.from({ length: executors }, () => new Cairn({ database, clock, onError: (error) => errors.push(error) }));
  try {
    const workflows = cairns.map((cairn) =>
      cairn.workflow("bench-wake", async (ctx, n: number) => {
        await ctx.sleep("nap", SLEEP_MS);
        latencies.push(performance.now() - jumpedAt);
        finished++;
        lastFinish = performance.now();
        return n;
      }),
    );
    for (const cairn of cairns) await cairn.launch();
    // Each chunk started (so parked) by the next executor in turn: a due run goes to its parker
    // first, and on this ManualClock the grace never runs out, so runs all parked by one executor
    // would be woken by it alone, whatever `executors` says.
    for (let at = 0, k = 0; at < runs; at += chunk, k++) {
      const size = Math.min(chunk, runs - at);
      const wf = workflows[k % workflows.length]!;
      await wf.startMany(Array.from({ length: size }, (_, i) => ({ input: at + i, options: { id: `w-${at + i}` } })));
    }
    // Every run unloaded and waiting on its timer before the jump.
    const waitingBy = Date.now() + 300_000;
    while ((await count(cairns[0]!, "SELECT count(*) AS n FROM cairn_runs WHERE status = 'waiting'")) < runs) {
      if (Date.now() > waitingBy) throw new Error("the runs did not all go to sleep within 5 minutes");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const profiler = profileDir === undefined ? null : new Session();
    if (profiler !== null) {
      profiler.connect();
      await profiler.post("Profiler.enable");
      await profiler.post("Profiler.start");
    }
    const cpuAtJump = process.cpuUsage();
    jumpedAt = performance.now();
    clock.advance(SLEEP_MS);
    const doneBy = Date.now() + 300_000;
    while (finished < runs) {
      if (Date.now() > doneBy) throw new Error(`only ${finished} of ${runs} runs woke within 5 minutes`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const cpu = process.cpuUsage(cpuAtJump);
    if (profiler !== null) {
      const { profile } = await profiler.post("Profiler.stop");
      await writeFile(join(profileDir!, `wake-${backend}.cpuprofile`), JSON.stringify(profile));
      profiler.disconnect();
    }
    // Wait for every run's finish to commit, so the next arm's database is quiet.
    while ((await count(cairns[0]!, "SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'")) < runs) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (errors.length > 0) throw new Error(`Cairn reported ${errors.length} background error(s)`, { cause: errors[0] });
    const sorted = [...latencies].sort((a, b) => a - b);
    return {
      backend,
      runs,
      executors,
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      maxMs: sorted[sorted.length - 1]!,
      allFinishedMs: lastFinish - jumpedAt,
      cpuMs: (cpu.user + cpu.system) / 1000,
    };
  } finally {
    for (const cairn of cairns) await cairn.shutdown();
  }
}

async function count(cairn: Cairn, sql: string): Promise<number> {
  return Number((await storeOf(cairn).query(sql)).rows[0]?.n);
}

async function expectCount(cairn: Cairn, sql: string, expected: number): Promise<void> {
  const n = await count(cairn, sql);
  if (n !== expected) throw new Error(`expected ${expected} from ${sql}, found ${n}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "10000" },
      chunk: { type: "string", default: "500" },
      executors: { type: "string", default: "1" },
      postgres: { type: "string" },
      only: { type: "string" },
      backend: { type: "string" },
      json: { type: "boolean", default: false },
      profile: { type: "string" },
    },
  });
  const runs = Number(values.runs);
  const chunk = Number(values.chunk);
  const executors = Number(values.executors);
  const url = values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES;
  const plans: { backend: string; fresh: () => Promise<ScratchDatabase> }[] = [];
  if (values.backend !== "postgres") plans.push({ backend: "sqlite", fresh: async () => scratchSqlite() });
  const postgres = values.backend === "sqlite" ? null : await ScratchPostgres.connect(url);
  if (postgres !== null && "server" in postgres) plans.push({ backend: "postgres", fresh: () => postgres.server.fresh() });
  else if (postgres !== null) process.stderr.write(`PostgreSQL skipped: ${postgres.unreachable}\n`);

  const startRows: StartsResult[] = [];
  const wakeRows: WakeResult[] = [];
  for (const plan of plans) {
    const inFresh = async <T>(fn: (database: string) => Promise<T>): Promise<T> => {
      const scratch = await plan.fresh();
      try {
        return await fn(scratch.database);
      } finally {
        await scratch.dispose();
      }
    };
    if (values.only !== "wake") {
      for (const method of ["start", "startMany"] as const) {
        process.stderr.write(`${plan.backend}: ${runs} starts by ${method}\n`);
        startRows.push(await inFresh((db) => starts(db, plan.backend, method, runs, chunk)));
      }
    }
    if (values.only !== "starts") {
      process.stderr.write(`${plan.backend}: ${runs} runs falling due at once, ${executors} executor(s)\n`);
      wakeRows.push(await inFresh((db) => wake(db, plan.backend, runs, executors, chunk, values.profile)));
    }
  }
  if (values.json) return console.log(JSON.stringify({ starts: startRows, wake: wakeRows }, null, 2));
  const n = (v: number): string => Math.round(v).toLocaleString("en-US");
  if (startRows.length > 0) {
    console.log(`Starting ${runs.toLocaleString("en-US")} runs in chunks of ${chunk} (a client, no executor)\n`);
    console.log(renderTable([["backend", "method", "runs/s"], ...startRows.map((r) => [r.backend, r.method, n(r.runsPerSecond)])]));
  }
  if (wakeRows.length > 0) {
    console.log(`\n${runs.toLocaleString("en-US")} runs falling due at once (wake latency: the jump to the body past its sleep)\n`);
    console.log(
      renderTable([
        ["backend", "executors", "p50 ms", "p99 ms", "max ms", "all finished ms", "CPU ms"],
        ...wakeRows.map((r) => [r.backend, String(r.executors), n(r.p50Ms), n(r.p99Ms), n(r.maxMs), n(r.allFinishedMs), n(r.cpuMs)]),
      ]),
    );
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

import { parseArgs } from "node:util";
import pg from "pg";
import { Cairn } from "../../src/index.js";
import { rawPostgresSequential } from "./raw-floors.js";
import { ScratchPostgres } from "./scratch-databases.js";

/**
 * `npm run build:tools && node .tmp/tools/tools/bench/pg-step-cost.js [--steps 1000] [--runs 200] [--rounds 3] [--only raw|sequential|peers] [--no-fsync] [--in-flight 1,16]`
 *
 * What a durable step costs on PostgreSQL, counted rather than only timed (the machine is shared,
 * so wall clock alone is noisy): the statements Cairn sends to the server (every `query` call on
 * every pg client of the process, by statement name or first words), the process's CPU time, and
 * the wall time against the raw insert-per-commit floor measured in the same round.
 *
 * - sequential: one run of `--steps` steps (`npm run bench`'s workload); counted over the step window.
 * - peers: `--runs` runs of 10 steps, 1 and 16 in flight (`npm run bench:peers`'s workload);
 *   counted from the first start to the last result, so starts, claims and finishes are in it.
 *
 * `--no-fsync` takes the disk out (the scratch databases at synchronous_commit=off): what is left
 * is what the statements cost the client and the server.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";

/** Statements sent by every pg client of this process, by name (prepared) or first words. */
const counts = new Map<string, number>();
let counting = false;
const originalQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: pg.Client, ...args: unknown[]) {
  if (counting) {
    const config = args[0];
    const key =
      typeof config === "string"
        ? config.replace(/\s+/g, " ").slice(0, 40)
        : typeof config === "object" && config !== null
          ? ((config as { name?: string }).name ??
            String((config as { text?: string }).text ?? "?")
              .replace(/\s+/g, " ")
              .slice(0, 40))
          : "?";
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return originalQuery.apply(this, args);
};

interface Measured {
  label: string;
  steps: number;
  wallMs: number;
  cpuMs: number;
  statements: Map<string, number>;
}

function startCounting(): { stop(): { cpuMs: number; statements: Map<string, number> } } {
  counts.clear();
  counting = true;
  const cpu0 = process.cpuUsage();
  return {
    stop() {
      counting = false;
      const cpu = process.cpuUsage(cpu0);
      return { cpuMs: (cpu.user + cpu.system) / 1000, statements: new Map(counts) };
    },
  };
}

async function sequential(database: string, steps: number): Promise<Measured> {
  const cairn = new Cairn({ database });
  let counter: ReturnType<typeof startCounting> | null = null;
  let window = { first: 0, last: 0 };
  let result: ReturnType<ReturnType<typeof startCounting>["stop"]> | null = null;
  try {
    const wf = cairn.workflow("cost-sequential", async (ctx, n: number) => {
      counter = startCounting();
      const first = performance.now();
      for (let i = 0; i < n; i++) await ctx.step("step", () => ({ i }));
      window = { first, last: performance.now() };
      result = counter.stop();
      return n;
    });
    await cairn.launch();
    await (await wf.start(steps, { id: "sequential" })).result();
  } finally {
    await cairn.shutdown();
  }
  const r = result as unknown as { cpuMs: number; statements: Map<string, number> };
  return { label: "sequential", steps, wallMs: window.last - window.first, ...r };
}

async function peers(database: string, runs: number, inFlight: number): Promise<Measured> {
  const cairn = new Cairn({ database });
  try {
    const wf = cairn.workflow("cost-peers", async (ctx, n: number) => {
      let last: unknown;
      for (let i = 0; i < n; i++) last = await ctx.step("step", () => ({ i, at: Math.random() }));
      return last;
    });
    await cairn.launch();
    const drive = async (prefix: string, total: number): Promise<number> => {
      let next = 0;
      const begin = performance.now();
      await Promise.all(
        Array.from({ length: Math.min(inFlight, total) }, async () => {
          while (next < total) {
            const i = next++;
            await (await wf.start(10, { id: `${prefix}-${i}` })).result();
          }
        }),
      );
      return performance.now() - begin;
    };
    await drive("warm", Math.min(runs, 2 * inFlight));
    const counter = startCounting();
    const wallMs = await drive("run", runs);
    return { label: `peers ${inFlight} in flight`, steps: runs * 10, wallMs, ...counter.stop() };
  } finally {
    await cairn.shutdown();
  }
}

function report(m: Measured, floorUsPerRow: number): void {
  const usPerStep = (m.wallMs * 1000) / m.steps;
  const total = [...m.statements.values()].reduce((a, b) => a + b, 0);
  console.log(
    `${m.label}: ${m.steps} steps, ${Math.round((m.steps * 1000) / m.wallMs)} steps/s, ${usPerStep.toFixed(1)} µs/step ` +
      `(${(floorUsPerRow / usPerStep).toFixed(2)}× the floor's ${floorUsPerRow.toFixed(1)} µs/row), ` +
      `client CPU ${((m.cpuMs * 1000) / m.steps).toFixed(1)} µs/step, statements ${(total / m.steps).toFixed(3)}/step`,
  );
  for (const [key, n] of [...m.statements.entries()].sort((a, b) => b[1] - a[1])) {
    console.log(`    ${(n / m.steps).toFixed(3)}/step  ${n}  ${key}`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      steps: { type: "string", default: "1000" },
      runs: { type: "string", default: "200" },
      rounds: { type: "string", default: "3" },
      postgres: { type: "string" },
      only: { type: "string" },
      "no-fsync": { type: "boolean", default: false },
      "in-flight": { type: "string", default: "1,16" },
    },
  });
  const url = values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES;
  const connected = await ScratchPostgres.connect(url);
  if (!("server" in connected)) throw new Error(`PostgreSQL unreachable: ${connected.unreachable}`);
  const server = connected.server;
  const inFresh = async <T>(fn: (db: string) => Promise<T>): Promise<T> => {
    const scratch = await server.fresh(!values["no-fsync"]);
    try {
      return await fn(scratch.database);
    } finally {
      await scratch.dispose();
    }
  };
  const steps = Number(values.steps);
  const runs = Number(values.runs);
  const only = values.only;
  for (let round = 0; round < Number(values.rounds); round++) {
    const cpu0 = process.cpuUsage();
    const raw = await inFresh((db) => rawPostgresSequential(db, steps));
    const cpu = process.cpuUsage(cpu0);
    const floor = (raw.elapsedMs * 1000) / raw.operations;
    console.log(
      `round ${round + 1}: raw floor ${floor.toFixed(1)} µs/row (${Math.round(1e6 / floor)} rows/s), ` +
        `client CPU ${((cpu.user + cpu.system) / raw.operations).toFixed(1)} µs/row (with its database's creation)`,
    );
    if (only === "raw") continue;
    if (only === undefined || only === "sequential") report(await inFresh((db) => sequential(db, steps)), floor);
    if (only === undefined || only === "peers") {
      for (const inFlight of values["in-flight"].split(",").map(Number)) report(await inFresh((db) => peers(db, runs, inFlight)), floor);
    }
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

import { parseArgs } from "node:util";
import pg from "pg";
import { Cairn, type Workflow } from "../../src/index.js";
import { ScratchPostgres } from "./scratch-databases.js";

/**
 * `npm run build:tools && node .tmp/tools/tools/bench/queue-backlog.js [--backlogs 1000,10000,30000] [--seconds 8] [--postgres <url>]`
 *
 * What a queue's backlog costs the database (PostgreSQL). For each backlog size, a fresh database:
 * two executors serve queue "slow" (concurrency 2, runs of one 100 ms step), `backlog` runs are
 * enqueued into it, the statistics are brought up to date (ANALYZE), and then, for `seconds`,
 * the executors drain it while a client starts and awaits ordinary runs (`start()`, the core
 * claim's work) one at a time, 40 ms apart. Reported per statement of Cairn's (by its prepared
 * name): milliseconds spent in it per second of the window (from the call to its answer, in the
 * executors' process), calls per second and the mean call. A statement whose cost follows the
 * backlog shows it in the ratio of the largest backlog's mean call to the smallest's, printed last.
 */

const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";

interface Cost {
  calls: number;
  ms: number;
}

/** Every statement sent by a pg client of this process while `counting`, timed to its answer. */
const costs = new Map<string, Cost>();
let counting = false;
type Callback = (error: unknown, result: unknown) => void;
const originalQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: pg.Client, ...args: unknown[]) {
  const config = args[0] as { name?: string; text?: string; callback?: Callback } | string;
  const key =
    typeof config === "string" ? config.replace(/\s+/g, " ").slice(0, 40) : (config.name ?? String(config.text).replace(/\s+/g, " ").slice(0, 40));
  const began = performance.now();
  const done = (): void => {
    if (!counting) return;
    const cost = costs.get(key) ?? { calls: 0, ms: 0 };
    cost.calls++;
    cost.ms += performance.now() - began;
    costs.set(key, cost);
  };
  // Cairn's pool client hands pg a query with its callback set (statement-client.ts); others pass a callback or take a promise.
  if (typeof config === "object" && typeof config.callback === "function") {
    const callback = config.callback;
    config.callback = (error, result) => {
      done();
      callback(error, result);
    };
    return originalQuery.apply(this, args);
  }
  const last = args.length - 1;
  if (typeof args[last] === "function") {
    const callback = args[last] as Callback;
    args[last] = (error: unknown, result: unknown) => {
      done();
      callback(error, result);
    };
    return originalQuery.apply(this, args);
  }
  const result = originalQuery.apply(this, args);
  if (result instanceof Promise) result.then(done, done);
  return result;
};

function declare(database: string): { cairn: Cairn; slow: Workflow<number, number>; plain: Workflow<number, number> } {
  const cairn = new Cairn({ database, onError: () => undefined });
  cairn.queue("slow", { concurrency: 2 });
  const slow = cairn.workflow("slow", async (ctx, i: number) =>
    ctx.step("work", async () => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return i;
    }),
  );
  const plain = cairn.workflow("plain", async (ctx, i: number) => ctx.step("work", () => i));
  return { cairn, slow, plain };
}

async function measure(database: string, backlog: number, seconds: number): Promise<{ windowS: number; costs: Map<string, Cost>; left: number }> {
  const first = declare(database);
  const second = declare(database);
  await first.cairn.launch();
  await second.cairn.launch();
  for (let i = 0; i < backlog; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, backlog - i) }, (_, j) => first.slow.enqueue("slow", i + j, { id: `queued-${i + j}` })));
  }
  const sql = new pg.Client({ connectionString: database });
  await sql.connect();
  try {
    await sql.query("ANALYZE");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    costs.clear();
    counting = true;
    const began = performance.now();
    for (let i = 0; performance.now() - began < seconds * 1_000; i++) {
      await (await first.plain.start(i, { id: `plain-${i}` })).result();
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
    counting = false;
    const windowS = (performance.now() - began) / 1_000;
    const { rows } = await sql.query<{ n: string }>("SELECT count(*) AS n FROM cairn_runs WHERE status = 'enqueued'");
    return { windowS, costs: new Map(costs), left: Number(rows[0]!.n) };
  } finally {
    counting = false;
    await sql.end();
    await first.cairn.shutdown();
    await second.cairn.shutdown();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { backlogs: { type: "string", default: "1000,10000,30000" }, seconds: { type: "string", default: "8" }, postgres: { type: "string" } },
  });
  const backlogs = values.backlogs!.split(",").map(Number);
  const seconds = Number(values.seconds);
  if (backlogs.some((n) => !Number.isInteger(n) || n < 1) || !(seconds > 0))
    throw new Error("--backlogs takes positive integers, --seconds a positive number");
  const connected = await ScratchPostgres.connect(values.postgres ?? process.env.CAIRN_BENCH_POSTGRES_URL ?? LOCAL_POSTGRES);
  if ("unreachable" in connected) throw new Error(`PostgreSQL unreachable: ${connected.unreachable}`);
  const server = connected.server;
  console.log(`queue-backlog — PostgreSQL ${await server.version()}; executors' statement time while a backlog drains (2 executors, concurrency 2)`);
  const means = new Map<string, number[]>();
  for (const backlog of backlogs) {
    const scratch = await server.fresh();
    try {
      const result = await measure(scratch.database, backlog, seconds);
      console.log(`\nbacklog ${backlog} (still queued at the end: ${result.left}), window ${result.windowS.toFixed(1)} s`);
      console.log(`  ${"statement".padEnd(42)} ${"ms/s".padStart(7)} ${"calls/s".padStart(8)} ${"mean ms".padStart(8)}`);
      const sorted = [...result.costs].sort((a, b) => b[1].ms - a[1].ms).slice(0, 10);
      for (const [name, cost] of sorted) {
        console.log(
          `  ${name.padEnd(42)} ${(cost.ms / result.windowS).toFixed(1).padStart(7)} ${(cost.calls / result.windowS).toFixed(1).padStart(8)} ${(cost.ms / cost.calls).toFixed(2).padStart(8)}`,
        );
      }
      for (const [name, cost] of result.costs)
        means.set(name.replace(/_[0-9a-f]{16}_call$/, "_call"), [
          ...(means.get(name.replace(/_[0-9a-f]{16}_call$/, "_call")) ?? []),
          cost.ms / cost.calls,
        ]);
    } finally {
      await scratch.dispose();
    }
  }
  if (backlogs.length > 1) {
    // A journal write, which no backlog touches, measures how much slower the server was anyway.
    const ratio = (name: string): number | undefined => {
      const m = means.get(name);
      return m !== undefined && m.length === backlogs.length ? m[m.length - 1]! / m[0]! : undefined;
    };
    const baseline = ratio("cairn_step_insert");
    console.log(
      `\nmean call at backlog ${backlogs[backlogs.length - 1]} ÷ at ${backlogs[0]} (1.0×: the backlog costs it nothing), and that ÷ cairn_step_insert's:`,
    );
    for (const name of ["cairn_claim_look", "cairn_claim", "cairn_dispatch_call", "cairn_step_insert"]) {
      const r = ratio(name);
      if (r !== undefined)
        console.log(`  ${name.padEnd(24)} ${r.toFixed(1).padStart(5)}×  ${baseline === undefined ? "" : `${(r / baseline).toFixed(1).padStart(5)}×`}`);
    }
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

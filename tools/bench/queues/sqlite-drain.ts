import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { Cairn } from "../../../src/index.js";
import { storeOf } from "../../internal.js";
import { PER_PROCESS_CONCURRENCY } from "./system.js";

/**
 * `node .tmp/tools/tools/bench/queues/sqlite-drain.js [--runs 3000] [--enqueue]`
 *
 * A diagnostic for one arm of `npm run bench:queues`, Cairn on SQLite with `enqueue()`: one
 * process fills a fresh file with queued runs of the 1-step workflow (queue "bench",
 * workerConcurrency 16, FIFO), shuts that client down, then launches one executor on the file and
 * times its drain. It prints the drain's wall time, runs/s, the CPU time this process spent during
 * the drain (user + system, the figure a loaded machine disturbs least; system alone) and its minor
 * page faults (fresh pages the heap took from the kernel), so it can run under
 * `strace -f -c -e trace=fsync,fdatasync` or `node --cpu-prof` without the bench's other processes.
 * `--start` fills with `start()` on a client instead (the implicit default queue), for comparison.
 */
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3000" },
    start: { type: "boolean", default: false },
    /** Fill this file and exit (a drain of it later, under a profiler, profiles the drain alone). */
    "fill-only": { type: "string" },
    /** Drain this file, filled by --fill-only. */
    from: { type: "string" },
    /** Time every better-sqlite3 call of the drain by statement and print the costliest. */
    "trace-sql": { type: "boolean", default: false },
  },
});
const runs = Number(values.runs);
const queued = !values.start;

function declare(cairn: Cairn): Cairn {
  if (queued) cairn.queue("bench", { workerConcurrency: PER_PROCESS_CONCURRENCY });
  return cairn;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "cairn-drain-"));
  const database = values.from ?? values["fill-only"] ?? join(dir, "bench.db");
  try {
    if (values.from === undefined) await fill(database);
    if (values["fill-only"] !== undefined) return;
    await drain(database);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function fill(database: string): Promise<void> {
  const client = declare(new Cairn({ database }));
  const fillWorkflow = client.workflow("bench", async (ctx, input: { i: number }) => ctx.step("work", () => input.i));
  await storeOf(client).migrate();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < runs) {
        const i = next++;
        if (queued) await fillWorkflow.enqueue("bench", { i }, { id: `run-${i}` });
        else await fillWorkflow.start({ i }, { id: `run-${i}` });
      }
    }),
  );
  await client.shutdown();
}

async function drain(database: string): Promise<void> {
  const executor = declare(new Cairn({ database, onError: (error) => console.error("[drain]", error) }));
  executor.workflow("bench", async (ctx, input: { i: number }) => ctx.step("work", () => input.i));
  const store = storeOf(executor);
  const traced = values["trace-sql"] ? traceSql() : null;
  const cpu = process.cpuUsage();
  const faults = process.resourceUsage().minorPageFault;
  const begin = performance.now();
  await executor.launch();
  for (;;) {
    const [row] = await store.select<{ n: number }>("SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'");
    if (Number(row?.n) >= runs) break;
    await new Promise((resolve) => setTimeout(resolve, Math.max(2, (performance.now() - begin) / 50)));
  }
  const wallMs = performance.now() - begin;
  const used = process.cpuUsage(cpu);
  await executor.shutdown();
  traced?.();
  const minorFaults = process.resourceUsage().minorPageFault - faults;
  const cpuMs = (used.user + used.system) / 1000;
  console.log(
    JSON.stringify({
      runs,
      wallMs: Math.round(wallMs),
      runsPerSecond: Math.round((runs * 1000) / wallMs),
      cpuMs: Math.round(cpuMs),
      cpuUsPerRun: Math.round((cpuMs * 1000) / runs),
      systemMs: Math.round(used.system / 1000),
      minorFaults,
    }),
  );
}

/** Wraps better-sqlite3's calls to time them by statement text; the returned function prints the table. */
function traceSql(): () => void {
  const costs = new Map<string, { calls: number; ms: number; rows: number }>();
  const add = (text: string, ms: number, rows: number): void => {
    const key = text.replace(/\s+/g, " ").slice(0, 110);
    const cost = costs.get(key) ?? { calls: 0, ms: 0, rows: 0 };
    cost.calls++;
    cost.ms += ms;
    cost.rows += rows;
    costs.set(key, cost);
  };
  const probe = new Database(":memory:");
  const statementProto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<string, (...args: unknown[]) => unknown>;
  probe.close();
  for (const method of ["all", "run", "get"]) {
    const original = statementProto[method]!;
    statementProto[method] = function (this: { source: string }, ...args: unknown[]) {
      const begin = performance.now();
      const result = original.apply(this, args);
      add(this.source, performance.now() - begin, Array.isArray(result) ? result.length : 0);
      return result;
    };
  }
  const dbProto = Database.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const exec = dbProto.exec!;
  dbProto.exec = function (this: unknown, text: unknown) {
    const begin = performance.now();
    const result = exec.call(this, text);
    add(`exec ${String(text)}`, performance.now() - begin, 0);
    return result;
  };
  return () => {
    const rows = [...costs].sort((a, b) => b[1].ms - a[1].ms).slice(0, 25);
    for (const [text, cost] of rows) {
      console.log(
        `${cost.ms.toFixed(0).padStart(7)} ms ${String(cost.calls).padStart(7)} calls ${(cost.ms / cost.calls).toFixed(3).padStart(7)} ms/call ${(cost.rows / cost.calls).toFixed(1).padStart(6)} rows  ${text}`,
      );
    }
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

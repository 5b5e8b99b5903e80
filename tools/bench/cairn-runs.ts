import { Cairn } from "../../src/index.js";
import type { Timing } from "./stats.js";
import { storeOf } from "../internal.js";

/**
 * The Cairn workloads, driven through the public API only (`new Cairn`, `cairn.workflow`,
 * `launch`, `wf.start`, `run.result`, `shutdown`) with default options, as an application would.
 *
 * Step latency is taken from the workflow's side: the time from calling `ctx.step` to its promise
 * resolving, i.e. what a workflow pays per durable step (encoding, the commit, the hops back).
 * `elapsedMs` is the step window (first step called to last step resolved), comparable with a raw
 * floor's loop; `endToEndMs` adds creating the run, starting it, finishing it and `result()`.
 */
export interface CairnTiming extends Timing {
  endToEndMs: number;
}

export interface PayloadDedup {
  steps: number;
  /** Length of the encoded value each step returned, in characters (ASCII: bytes). */
  valueBytes: number;
  /** What storing the value with every step would take. */
  naiveBytes: number;
  payloadRows: number;
  payloadBytes: number;
  /** Step rows that refer to a payload by hash instead of holding the value inline. */
  stepsByHash: number;
  /** SQLite: the file's pages. PostgreSQL: Cairn's tables with their indexes and TOAST. */
  databaseBytes: number;
  /** PostgreSQL only: pg_database_size, which includes the ~7 MB catalog of any empty database. */
  wholeDatabaseBytes: number | null;
}

/** `durable: false` opens SQLite with synchronous=OFF (see raw-floors.ts); on PostgreSQL the scratch database decides. */
export async function cairnSequential(database: string, steps: number, durable = true): Promise<CairnTiming> {
  const latenciesUs: number[] = [];
  let stepWindow = { first: 0, last: 0 };
  return withCairn(database, durable, async (cairn) => {
    const wf = cairn.workflow("bench-sequential", async (ctx, n: number) => {
      const first = performance.now();
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await ctx.step("step", () => ({ i }));
        latenciesUs.push((performance.now() - t0) * 1000);
      }
      stepWindow = { first, last: performance.now() };
      return n;
    });
    await cairn.launch();
    const begin = performance.now();
    const run = await wf.start(steps, { id: "sequential" });
    await run.result();
    const endToEndMs = performance.now() - begin;
    await expectStepRows(cairn, steps);
    return { operations: steps, elapsedMs: stepWindow.last - stepWindow.first, endToEndMs, latenciesUs };
  });
}

/** `runs` runs started together, each doing `stepsPerRun` sequential steps. */
export async function cairnConcurrent(database: string, runs: number, stepsPerRun: number): Promise<CairnTiming> {
  const latenciesUs: number[] = [];
  let first = Infinity;
  let last = -Infinity;
  return withCairn(database, true, async (cairn) => {
    const wf = cairn.workflow("bench-concurrent", async (ctx, n: number) => {
      first = Math.min(first, performance.now());
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await ctx.step("step", () => ({ i }));
        latenciesUs.push((performance.now() - t0) * 1000);
      }
      last = Math.max(last, performance.now());
      return n;
    });
    await cairn.launch();
    const begin = performance.now();
    const handles = await Promise.all(Array.from({ length: runs }, (_, i) => wf.start(stepsPerRun, { id: `concurrent-${i}` })));
    await Promise.all(handles.map((handle) => handle.result()));
    const endToEndMs = performance.now() - begin;
    await expectStepRows(cairn, runs * stepsPerRun);
    return { operations: runs * stepsPerRun, elapsedMs: last - first, endToEndMs, latenciesUs };
  });
}

/** One run whose `steps` steps all return the same value of `valueBytes` characters. */
export async function cairnPayloadDedup(database: string, steps: number, valueBytes: number): Promise<PayloadDedup> {
  const value = incompressible(valueBytes - 2); // the encoding adds the two quotes of a JSON string
  return withCairn(database, true, async (cairn) => {
    const wf = cairn.workflow("bench-payload", async (ctx, n: number) => {
      for (let i = 0; i < n; i++) await ctx.step("same-value", () => value);
      return n;
    });
    await cairn.launch();
    await (await wf.start(steps, { id: "payload" })).result();
    const store = storeOf(cairn);
    const payloads = await queryRow(cairn, "SELECT count(*) AS n, COALESCE(sum(size), 0) AS bytes FROM cairn_payloads");
    const byHash = await queryRow(cairn, "SELECT count(*) AS n FROM cairn_steps WHERE output_hash IS NOT NULL");
    let databaseBytes: number;
    let wholeDatabaseBytes: number | null = null;
    if (store.backend === "sqlite") {
      databaseBytes = Number((await queryRow(cairn, "SELECT page_count * page_size AS bytes FROM pragma_page_count(), pragma_page_size()")).bytes);
    } else {
      const sizes = await queryRow(
        cairn,
        `SELECT (SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'cairn\\_%') AS cairn,
                pg_database_size(current_database()) AS whole`,
      );
      databaseBytes = Number(sizes.cairn);
      wholeDatabaseBytes = Number(sizes.whole);
    }
    return {
      steps,
      valueBytes,
      naiveBytes: steps * valueBytes,
      payloadRows: Number(payloads.n),
      payloadBytes: Number(payloads.bytes),
      stepsByHash: Number(byHash.n),
      databaseBytes,
      wholeDatabaseBytes,
    };
  });
}

/**
 * Opens a Cairn on `database`, runs `body`, and shuts it down. Errors the executor could hand to
 * no caller (a failed poll) fail the measurement instead of going to the console.
 */
async function withCairn<T>(database: string, durable: boolean, body: (cairn: Cairn) => Promise<T>): Promise<T> {
  const errors: unknown[] = [];
  const cairn = new Cairn({ database, onError: (error) => errors.push(error), ...(durable ? {} : { synchronous: "OFF" }) });
  let result: T;
  try {
    result = await body(cairn);
  } finally {
    await cairn.shutdown();
  }
  if (errors.length > 0) throw new Error(`Cairn reported ${errors.length} background error(s) during the benchmark`, { cause: errors[0] });
  return result;
}

async function queryRow(cairn: Cairn, sql: string): Promise<Record<string, unknown>> {
  const row = (await storeOf(cairn).query(sql)).rows[0];
  if (row === undefined) throw new Error(`no row from: ${sql}`);
  return row;
}

/** A wrong count means the benchmark measured something other than what it claims. */
async function expectStepRows(cairn: Cairn, expected: number): Promise<void> {
  const count = Number((await queryRow(cairn, "SELECT count(*) AS n FROM cairn_steps")).n);
  if (count !== expected) throw new Error(`expected ${expected} journal rows after the benchmark, found ${count}`);
}

/**
 * A deterministic string that neither SQLite nor PostgreSQL's TOAST compression can shrink much,
 * so the stored sizes reflect deduplication and nothing else.
 */
function incompressible(length: number): string {
  const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  let state = 0x2545f491;
  let out = "";
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    out += alphabet[(state >>> 16) % alphabet.length];
  }
  return out;
}

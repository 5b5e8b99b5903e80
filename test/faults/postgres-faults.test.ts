import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import {
  doubledSteps,
  faultWorkers,
  noScratchCluster,
  readFaultLedger,
  scratchDir,
  startScratchCluster,
  sum,
  type ScratchCluster,
} from "./fault-harness.js";

/**
 * Two executors (separate processes) share one PostgreSQL under load; the test takes every
 * database session away from them at once. Issue 8, point 1: before the fix, each executor came
 * back carrying its dead session's backend pid, the other saw that pid missing from
 * pg_stat_activity and took its runs — every poll, both ways, forever.
 *
 * What must hold: every run finishes and every `run.result()` caller hears success (never a
 * transient driver error); a run in flight at the fault re-runs at most its one step in flight;
 * runs started once the fleet has re-registered double no step at all; `shutdown()` returns.
 */

const RUNS = 10;
const STEPS = 60;

const sharedUrl = process.env.CAIRN_TEST_POSTGRES_URL;
const requirePostgres = process.env.CAIRN_REQUIRE_POSTGRES === "1";

interface FleetReport {
  doubledInFlight: number;
  worstRunInFlight: number;
  doubledAfter: number;
  healMs: number;
  shutdownMs: number[];
}

async function fleetUnderFault(
  workers: ReturnType<typeof faultWorkers>,
  database: string,
  label: string,
  fault: () => Promise<void>,
): Promise<FleetReport> {
  const ledger = join(scratchDir(label), "ledger.txt");
  const fleet = ["a", "b"].map((prefix) => workers.spawn({ database, ledger, prefix, runs: RUNS, steps: STEPS, stepMs: 10 }));
  for (const worker of fleet) await worker.line(/^launched /);
  for (const worker of fleet) worker.send("start 1");
  for (const worker of fleet) await worker.line(/^started 1$/);
  // Steps in flight everywhere: a fifth of the first batch's effects done.
  await until(() => readFaultLedger(ledger).length >= (2 * RUNS * STEPS) / 5, 20_000, "the first batch under way");
  const faultAt = Date.now();
  await fault();
  // Healed: every executor has re-registered under a new identity.
  for (const worker of fleet) await worker.count(/^identity /, 2, 20_000);
  const healMs = Math.max(...fleet.map((w) => Number(w.lines.filter((l) => l.startsWith("identity "))[1]!.split(" ")[2]))) - faultAt;
  for (const worker of fleet) worker.send("start 2");
  const healedAt = Date.now();

  for (const [i, worker] of fleet.entries()) {
    const prefix = i === 0 ? "a" : "b";
    const results = await worker.results(`${prefix}-`, 2 * RUNS, 45_000);
    for (const [id, outcome] of results) expect(outcome, `${label}: ${id}`).toBe("ok");
  }
  const settledMs = Date.now() - healedAt;
  const shutdownMs: number[] = [];
  for (const worker of fleet) shutdownMs.push(await worker.shutdown());
  // status() after shutdown(): Cairn's own error, not the driver's TypeError.
  for (const worker of fleet) expect((await worker.line(/^after-shutdown .*$/))[0]).toBe("after-shutdown CairnError CAIRN_ERROR");

  const entries = readFaultLedger(ledger);
  const inFlight = new Map([...doubledSteps(entries, "a-1-"), ...doubledSteps(entries, "b-1-")]);
  const after = new Map([...doubledSteps(entries, "a-2-"), ...doubledSteps(entries, "b-2-")]);
  // Every step of every run ran.
  expect(new Set(entries.map((e) => `${e.runId} ${e.seq}`)).size).toBe(2 * 2 * RUNS * STEPS);
  const report = {
    doubledInFlight: sum(inFlight.values()),
    worstRunInFlight: Math.max(0, ...inFlight.values()),
    doubledAfter: sum(after.values()),
    healMs,
    shutdownMs,
    settledMs,
  };
  console.log(`[faults] ${label}: ${JSON.stringify(report)}`);
  expect(report.worstRunInFlight, `${label}: re-runs of one run in flight at the fault`).toBeLessThanOrEqual(1);
  expect(report.doubledAfter, `${label}: doubled steps in runs started after the fleet healed`).toBe(0);
  for (const ms of shutdownMs) expect(ms).toBeLessThan(12_000);
  return report;
}

describe.skipIf(sharedUrl === undefined)("PostgreSQL: pg_terminate_backend of every session of a fleet of two executors", () => {
  const workers = faultWorkers();

  it("every run finishes, callers never see a transient error, no doubled step once the fleet re-registered", async () => {
    const name = `cairn_fault_${Date.now().toString(36)}`;
    await admin(sharedUrl!, (client) => client.query(`CREATE DATABASE ${name}`));
    const url = new URL(sharedUrl!);
    url.pathname = `/${name}`;
    try {
      await fleetUnderFault(workers, url.toString(), "terminate", async () => {
        // Only this test's database: the shared server serves other tests too.
        const ended = await admin(sharedUrl!, (client) =>
          client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [name]),
        );
        expect(ended.rowCount).toBeGreaterThanOrEqual(4);
      });
    } finally {
      await admin(sharedUrl!, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    }
  });
});

describe("PostgreSQL: a server restart (pg_ctl restart -m fast) under a fleet of two executors", () => {
  const workers = faultWorkers();
  const missing = noScratchCluster();
  if (missing !== undefined && requirePostgres) throw new Error(`CAIRN_REQUIRE_POSTGRES=1 but ${missing}`);
  let server: ScratchCluster | undefined;
  afterAll(() => server?.stop());

  it.skipIf(missing !== undefined)("every run finishes, callers never see a transient error, no doubled step once the fleet re-registered", async () => {
    server = startScratchCluster(55433);
    const cluster = server;
    await fleetUnderFault(workers, cluster.url, "restart", async () => {
      cluster.restart("fast");
    });
  });
});

async function admin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const giveUpAt = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > giveUpAt) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}


import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { sqliteWriteLockIsFree } from "../crash/crash-harness.js";
import { noScratchCluster, startScratchCluster, type ScratchCluster } from "../faults/fault-harness.js";
import { eventually } from "../harness.js";
import { scratchDir } from "../scratch.js";

// Queued runs under faults, with real executor processes (queue-fault-worker.mjs):
// (a) an executor frozen (SIGSTOP) past its lease, then woken (SIGCONT), commits nothing into the
//     queued runs it lost; both backends (SQLite: two processes on one file);
// (b) PostgreSQL restarted (`pg_ctl restart -m fast | immediate`, a private cluster) while
//     executors dispatch a queue with a global concurrency limit: they reconnect and finish; nothing
//     lost, nothing doubled, the limit never exceeded per the ledger.
// QUEUE_FAULT_RUNS sets the number of runs (CI default small, to stay quick).
const RUNS = Number(process.env.QUEUE_FAULT_RUNS ?? "40");
const WORKER = fileURLToPath(new URL("./queue-fault-worker.mjs", import.meta.url));
const requirePostgres = process.env.CAIRN_REQUIRE_POSTGRES === "1";

interface Effect {
  runId: string;
  step: string;
  pid: number;
  start: number;
  end: number;
}

function readLedger(path: string): Effect[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [runId, step, pid, start, end] = line.split(" ");
      return { runId: runId!, step: step!, pid: Number(pid), start: Number(start), end: Number(end) };
    });
}

function byStep(effects: Effect[]): Map<string, Effect[]> {
  const map = new Map<string, Effect[]>();
  for (const e of effects) map.set(`${e.runId} ${e.step}`, [...(map.get(`${e.runId} ${e.step}`) ?? []), e]);
  return map;
}

/** The most effects of step `step` at work at one instant (an end at a start's instant frees first). */
function maxOverlap(effects: Effect[], step: string): number {
  const events = effects
    .filter((e) => e.step === step)
    .flatMap((e) => [
      { t: e.start, d: 1 },
      { t: e.end, d: -1 },
    ]);
  events.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let max = 0;
  for (const event of events) max = Math.max(max, (now += event.d));
  return max;
}

function processes() {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) {
      if (child.exitCode !== null) continue;
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
  });
  return (env: Record<string, string>) => {
    const child = spawn(process.execPath, [WORKER], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    children.push(child);
    const out = { lines: [] as string[], stderr: "" };
    let buffered = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      const parts = (buffered + chunk).split("\n");
      buffered = parts.pop()!;
      out.lines.push(...parts);
    });
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (out.stderr += chunk));
    const stop = async () => {
      child.stdin!.end();
      if (child.exitCode === null) await new Promise((resolve) => child.on("exit", resolve));
    };
    return { child, out, stop };
  };
}

async function enqueueAll(db: string): Promise<void> {
  // The submitter declares the queue and enqueues; it runs nothing (never launched).
  const submitter = new Cairn({ database: db, onError: () => undefined });
  submitter.queue("work", { workerConcurrency: 1 });
  const job = submitter.workflow("job", async (_ctx, n: number) => n * 2);
  try {
    for (let i = 0; i < RUNS; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, RUNS - i) }, (_, j) => job.enqueue("work", i + j, { id: `run-${i + j}` })));
    }
  } finally {
    await submitter.shutdown();
  }
}

/** Every run succeeded once with its own output, each with exactly its two journaled steps. */
async function expectAllDoneOnce(query: (sql: string) => Promise<Record<string, unknown>[]>): Promise<void> {
  const runs = await query("SELECT id, status, output FROM cairn_runs");
  expect(runs).toHaveLength(RUNS);
  for (const row of runs) {
    expect(row.status, String(row.id)).toBe("succeeded");
    expect(JSON.parse(String(row.output))).toBe(Number(String(row.id).slice(4)) * 2);
  }
  const steps = await query("SELECT COUNT(*) AS n FROM cairn_steps");
  expect(Number(steps[0]!.n)).toBe(RUNS * 2);
}

describe.each(BACKENDS)("a queue executor frozen past its lease on $name", (backend) => {
  const worker = processes();
  const LEASE_MS = 1_000;

  it(`${RUNS} queued runs, two executor processes, one SIGSTOPped past its lease then SIGCONTed`, { timeout: 90_000 }, async () => {
    const db = await backend.freshDatabase();
    const ledger = join(scratchDir("queue-freeze-"), "ledger");
    writeFileSync(ledger, "");
    await enqueueAll(db);
    const common = { DB: db, LEDGER: ledger, LEASE_MS: String(LEASE_MS), WORKER_CONCURRENCY: "4" };
    // The victim's step "b" is slow: whenever it is frozen, it is in the middle of runs.
    const victim = worker({ ...common, STEP_MS: "1500" });
    const launched = await eventually(() => victim.out.lines.find((l) => l.startsWith("launched ")), 30_000);
    const victimId = launched.slice("launched ".length);
    const observer = new Cairn({ database: db, onError: () => undefined });
    const query = async (sql: string, params: unknown[] = []) => (await observer.query(sql, params)).rows as Record<string, unknown>[];
    try {
      const held = async () =>
        (await query("SELECT id FROM cairn_runs WHERE executor_id = $1 AND status = 'running'", [victimId])).map((r) => String(r.id));
      // Frozen holding runs whose step "a" is done and "b" is under way.
      await eventually(async () => victim.out.lines.some((l) => l.startsWith("done ")) && (await held()).length > 0, 30_000);
      for (let attempt = 0; ; attempt++) {
        victim.child.kill("SIGSTOP");
        // SQLite: a process frozen inside a write transaction holds the file's one write lock, and
        // no lease can take it over (see test/crash/pause-crash.test.ts): freeze between commits.
        if (backend.name !== "sqlite" || sqliteWriteLockIsFree(db)) break;
        victim.child.kill("SIGCONT");
        if (attempt > 100) throw new Error("the victim held SQLite's write lock at each of 100 freezes");
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const frozenAt = Date.now();
      const lost = await held();
      expect(lost.length).toBeGreaterThan(0);
      // The lost runs whose step "b" the victim had not checkpointed: every one of those is the peer's.
      const committedAtFreeze = new Set((await query("SELECT run_id FROM cairn_steps WHERE seq = 1")).map((r) => String(r.run_id)));
      const unfinished = lost.filter((id) => !committedAtFreeze.has(id));
      expect(unfinished.length).toBeGreaterThan(0);

      const peer = worker({ ...common, STEP_MS: "20" });
      // The peer takes the frozen executor's runs over once its lease lapses (its pid still answers),
      // and finishes everything while the victim is still frozen.
      await eventually(async () => {
        const rows = await query("SELECT status, COUNT(*) AS n FROM cairn_runs GROUP BY status");
        return Number(rows.find((r) => r.status === "succeeded")?.n ?? 0) === RUNS ? true : undefined;
      }, 60_000);
      const tookOverMs = Date.now() - frozenAt;
      const journalBefore = await query("SELECT run_id, seq, output FROM cairn_steps ORDER BY run_id, seq");
      const runsBefore = await query("SELECT id, status, output, executor_id FROM cairn_runs ORDER BY id");

      // Wake it: its in-flight steps finish their effects (at least once: they had begun), then
      // every commit it tries into the runs it lost is fenced.
      victim.child.kill("SIGCONT");
      // Long enough for its steps in flight (1.5 s of work each) to finish their effects — at least
      // once: they had begun — and for every commit it then tries into the runs it lost to be
      // refused. (Not "one late effect per lost run": a run dispatched to it but not yet loaded, or
      // whose effect was written just before the freeze, leaves none.)
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      expect(victim.child.exitCode).toBeNull();

      // Nothing it did after waking changed the journal or the runs: its late writes were fenced.
      expect(await query("SELECT run_id, seq, output FROM cairn_steps ORDER BY run_id, seq")).toEqual(journalBefore);
      expect(await query("SELECT id, status, output, executor_id FROM cairn_runs ORDER BY id")).toEqual(runsBefore);
      await expectAllDoneOnce(query);
      // The lost runs' step "b" results are the peer's (each step result carries its process's pid).
      for (const id of unfinished) {
        const [b] = await query("SELECT output FROM cairn_steps WHERE run_id = $1 AND seq = 1", [id]);
        expect(JSON.parse(String(b!.output)).pid, id).toBe(peer.child.pid);
      }

      // The ledger: a repeated effect only in a run the victim lost, only its step in flight at the
      // freeze (once by the victim, once by the peer); no completed step ran again.
      const effects = readLedger(ledger);
      const steps = byStep(effects);
      expect(steps.size).toBe(RUNS * 2);
      // Its step in flight at the freeze: "b" (slow), or "a" when the freeze fell between a's effect
      // and its checkpoint. At most one step per run.
      const repeatedRuns = new Set<string>();
      for (const [key, runs] of steps) {
        if (runs.length === 1) continue;
        const [runId] = key.split(" ");
        expect(lost, key).toContain(runId);
        expect(repeatedRuns.has(runId!), key).toBe(false);
        repeatedRuns.add(runId!);
        expect(runs.map((e) => e.pid).sort()).toEqual([victim.child.pid, peer.child.pid].sort());
        const victims = runs.find((e) => e.pid === victim.child.pid)!;
        // Before the freeze, or in its very millisecond (the step began before the signal landed).
        expect(victims.start, key).toBeLessThanOrEqual(frozenAt);
      }
      const repeated = repeatedRuns.size;
      for (const w of [victim, peer]) expect(w.out.stderr).not.toMatch(/SQLITE_BUSY|database is locked/);
      await Promise.all([victim.stop(), peer.stop()]);
      console.log(
        `[queue-freeze ${backend.name}] ${RUNS} runs; ${lost.length} held by the frozen executor, all done ${tookOverMs} ms after the freeze; ${repeated} in-flight steps re-run, late writes fenced`,
      );
    } finally {
      await observer.shutdown();
    }
  });
});

describe("PostgreSQL restarted while executors dispatch a queue", () => {
  const worker = processes();
  const missing = noScratchCluster();
  if (missing !== undefined && requirePostgres) throw new Error(`CAIRN_REQUIRE_POSTGRES=1 but ${missing}`);
  if (missing !== undefined) console.warn(`[queue-faults] the restart tests are skipped: ${missing}`);
  let server: ScratchCluster | undefined;
  afterAll(() => server?.stop());
  const CONCURRENCY = 4;

  it.skipIf(missing !== undefined).each(["fast", "immediate"] as const)(
    `pg_ctl restart -m %s: ${RUNS} runs, two executors, global concurrency ${CONCURRENCY}: all finish once, the limit holds`,
    { timeout: 120_000 },
    async (mode) => {
      // Port 5440 + 10 (issue 10): a cluster of this test's own, which it may restart.
      server ??= startScratchCluster();
      const cluster = server;
      const database = `cairn_queue_restart_${mode}`;
      const query = async (sql: string, params: unknown[] = [], url = cluster.url) => {
        const client = new pg.Client({ connectionString: url });
        client.on("error", () => undefined);
        await client.connect();
        try {
          return (await client.query(sql, params)).rows as Record<string, unknown>[];
        } finally {
          await client.end();
        }
      };
      await query(`DROP DATABASE IF EXISTS ${database}`);
      await query(`CREATE DATABASE ${database}`);
      const url = new URL(cluster.url);
      url.pathname = `/${database}`;
      const db = url.toString();
      const ledger = join(scratchDir("queue-restart-"), "ledger");
      writeFileSync(ledger, "");
      await enqueueAll(db);
      const common = { DB: db, LEDGER: ledger, LEASE_MS: "5000", STEP_MS: "60", WORKER_CONCURRENCY: "3", CONCURRENCY: String(CONCURRENCY) };
      const fleet = [worker(common), worker(common)];
      for (const w of fleet) await eventually(() => w.out.lines.find((l) => l.startsWith("launched ")), 30_000);
      // Restart once a third of the runs' work is done: runs in flight everywhere.
      await eventually(() => (readLedger(ledger).filter((e) => e.step === "b").length >= RUNS / 3 ? true : undefined), 30_000);
      const restartAt = Date.now();
      cluster.restart(mode);
      const backAt = Date.now();

      const dbQuery = (sql: string, params: unknown[] = []) => query(sql, params, db);
      await eventually(async () => {
        const rows = await dbQuery("SELECT COUNT(*) AS n FROM cairn_runs WHERE status = 'succeeded'").catch(() => [{ n: 0 }]);
        return Number(rows[0]!.n) === RUNS ? true : undefined;
      }, 90_000);
      const doneMs = Date.now() - backAt;
      await expectAllDoneOnce(dbQuery);

      const effects = readLedger(ledger);
      const steps = byStep(effects);
      expect(steps.size).toBe(RUNS * 2);
      // Re-run only where a step was in flight when the server went away: at most one step per
      // run, at most twice, and begun before the server was back.
      const repeatedRuns = new Set<string>();
      for (const [key, runs] of steps) {
        if (runs.length === 1) continue;
        const runId = key.split(" ")[0]!;
        expect(runs.length, key).toBe(2);
        expect(repeatedRuns.has(runId), key).toBe(false);
        repeatedRuns.add(runId);
        expect(runs[0]!.start, key).toBeLessThan(backAt);
      }
      // The queue's global limit, per the ledger of step "b"'s work (start and end times).
      const most = maxOverlap(effects, "b");
      expect(most).toBeLessThanOrEqual(CONCURRENCY);
      // Both executors lived through it (a socket error on a checked-out pool client once crashed one).
      for (const w of fleet) {
        expect(w.out.stderr).not.toMatch(/Unhandled|uncaught/i);
        expect(w.child.exitCode).toBeNull();
      }
      await Promise.all(fleet.map((w) => w.stop()));
      console.log(
        `[queue-restart -m ${mode}] ${RUNS} runs; restart took ${backAt - restartAt} ms, all done ${doneMs} ms later; ${repeatedRuns.size} in-flight steps re-run; at most ${most} at once (limit ${CONCURRENCY})`,
      );
    },
  );
});

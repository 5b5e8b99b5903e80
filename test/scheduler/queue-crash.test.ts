import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { eventually } from "../harness.js";
import { scratchDir } from "../scratch.js";

// Executor processes share one queue; one is SIGKILLed mid-run. Every run completes, none twice,
// and no step whose effect completed and was checkpointed runs again. PostgreSQL: three processes;
// SQLite: two processes on one file. QUEUE_CRASH_RUNS sets the number of runs (the figure is
// 500; CI runs fewer to stay quick).
const RUNS = Number(process.env.QUEUE_CRASH_RUNS ?? "90");
const WORKER = fileURLToPath(new URL("./queue-worker.mjs", import.meta.url));
const LEASE_MS = 5_000;

describe.each(BACKENDS)("queue runs survive a SIGKILLed executor on $name", (backend) => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  });

  function worker(db: string, ledger: string, stepMs: number) {
    const child = spawn(process.execPath, [WORKER], {
      env: { ...process.env, DB: db, LEDGER: ledger, LEASE_MS: String(LEASE_MS), STEP_MS: String(stepMs), WORKER_CONCURRENCY: "6" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    children.push(child);
    const out = { lines: [] as string[], stderr: "" };
    let buffered = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      const parts = (buffered + chunk).split("\n");
      buffered = parts.pop()!;
      out.lines.push(...parts);
    });
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (out.stderr += chunk));
    return { child, out };
  }

  it(`${RUNS} runs, ${backend.name === "postgres" ? 3 : 2} executor processes, one killed mid-run`, { timeout: 120_000 }, async () => {
    const db = await backend.freshDatabase();
    const ledger = join(scratchDir("queue-crash-"), "ledger");
    writeFileSync(ledger, "");
    // The submitter: declares the queue and enqueues, runs nothing itself (never launched).
    const submitter = new Cairn({ database: db, onError: () => undefined });
    submitter.queue("work", { workerConcurrency: 6 });
    const job = submitter.workflow("job", async (_ctx, n: number) => n * 2);
    try {
      // The whole backlog first, so the kill lands in the middle of it.
      for (let i = 0; i < RUNS; i += 50) {
        await Promise.all(Array.from({ length: Math.min(50, RUNS - i) }, (_, j) => job.enqueue("work", i + j, { id: `run-${i + j}` })));
      }
      // The victim's step "b" is slow: whenever it is killed, it is in the middle of runs.
      const workers = Array.from({ length: backend.name === "postgres" ? 3 : 2 }, (_, i) => worker(db, ledger, i === 0 ? 1_000 : 15));

      // Kill the first worker once it has done some steps and holds runs: in the middle of them.
      const victim = workers[0]!;
      const share = 2;
      const launched = await eventually(() => victim.out.lines.find((l) => l.startsWith("launched ")), 30_000);
      const victimId = launched.slice("launched ".length);
      const holding = async () => {
        const { rows } = await submitter.query("SELECT COUNT(*) AS n FROM cairn_runs WHERE executor_id = $1 AND status = 'running'", [victimId]);
        return Number(rows[0]!.n);
      };
      await eventually(async () => victim.out.lines.filter((l) => l.startsWith("done ")).length >= share && (await holding()) > 0, 60_000);
      victim.child.kill("SIGKILL");
      const killedAt = Date.now();
      // Takeover: no run is left running under the dead executor (its pid is gone: at once, not after the lease).
      await eventually(async () => (await holding()) === 0, 30_000);
      const takeoverMs = Date.now() - killedAt;

      const done = await eventually(async () => {
        const { rows } = await submitter.query("SELECT status, COUNT(*) AS n FROM cairn_runs GROUP BY status");
        const succeeded = Number(rows.find((r) => r.status === "succeeded")?.n ?? 0);
        return succeeded === RUNS ? rows : undefined;
      }, 90_000);
      expect(done).toHaveLength(1);
      const tookOverMs = Date.now() - killedAt;

      // Every output is the one the workflow computes: each run finished once, with its own steps.
      const { rows: outputs } = await submitter.query("SELECT id, output FROM cairn_runs");
      for (const row of outputs) expect(JSON.parse(String(row.output))).toBe(Number(String(row.id).slice(4)) * 2);
      const { rows: steps } = await submitter.query("SELECT COUNT(*) AS n FROM cairn_steps");
      expect(Number(steps[0]!.n)).toBe(RUNS * 2);

      // The ledger: an effect repeated only where the killed process did it and died before its
      // checkpoint — at most one step per run, and never a repeat of a live process's effect.
      const lines = readFileSync(ledger, "utf8").trim().split("\n");
      const byStep = new Map<string, string[]>();
      for (const line of lines) {
        const [runId, step, pid] = line.split(" ");
        const key = `${runId} ${step}`;
        byStep.set(key, [...(byStep.get(key) ?? []), pid!]);
      }
      expect(byStep.size).toBe(RUNS * 2);
      const repeatedRuns = new Set<string>();
      for (const [key, pids] of byStep) {
        if (pids.length === 1) continue;
        expect(pids.slice(0, -1).every((pid) => pid === String(victim.child.pid))).toBe(true);
        expect(pids.length).toBe(2);
        const runId = key.split(" ")[0]!;
        expect(repeatedRuns.has(runId)).toBe(false);
        repeatedRuns.add(runId);
      }
      // The survivors took the victim's runs over at once (its pid is gone), well within the lease.
      const { rows: recovered } = await submitter.query("SELECT COUNT(*) AS n FROM cairn_runs WHERE recoveries > 0");
      expect(Number(recovered[0]!.n)).toBeGreaterThan(0);
      expect(takeoverMs).toBeLessThan(LEASE_MS);
      for (const w of workers.slice(1)) {
        expect(w.out.stderr).not.toMatch(/SQLITE_BUSY|database is locked/);
        w.child.stdin!.end();
      }
      await Promise.all(workers.slice(1).map((w) => new Promise((resolve) => w.child.on("exit", resolve))));
      console.log(
        `[queue-crash ${backend.name}] ${RUNS} runs; taken over ${takeoverMs} ms and all done ${tookOverMs} ms after the kill; ${repeatedRuns.size} in-flight steps re-run`,
      );
    } finally {
      await submitter.shutdown();
    }
  });
});

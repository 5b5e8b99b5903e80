// An executor process for the queue fault tests (queue-faults.test.ts): plain ESM over the BUILT
// package. It declares queue "work" and serves it, running workflow "job" (steps "a" and "b", each
// an effect written to a ledger file and fsynced, each returning this process's pid so the journal
// shows whose result was committed) until killed or told to stop (stdin closes).
//
// Environment: DB (SQLite path or postgres:// URL), LEDGER (file), LEASE_MS, STEP_MS (how long step
// "b" works), WORKER_CONCURRENCY, CONCURRENCY (the queue's global limit; none when unset).
// Ledger line per effect: `<runId> <step> <pid> <startMs> <endMs>`.
// Stdout: `launched <executorId>`, then `done <runId> <step>` after each effect.
import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import { Cairn } from "../../dist/index.js";
import { runtimeOf } from "../../dist/internal.js";

const ledger = openSync(process.env.LEDGER, "a");
const stepMs = Number(process.env.STEP_MS ?? "20");

const cairn = new Cairn({
  database: process.env.DB,
  pollIntervalMs: 50,
  leaseMs: Number(process.env.LEASE_MS ?? "5000"),
  onError: (error) => process.stderr.write(`[cairn onError] ${error?.stack ?? error}\n`),
});
cairn.queue("work", {
  workerConcurrency: Number(process.env.WORKER_CONCURRENCY ?? "8"),
  ...(process.env.CONCURRENCY ? { concurrency: Number(process.env.CONCURRENCY) } : {}),
});

function effect(runId, step, start) {
  // fsynced before the step returns: a line here is an effect that happened.
  writeSync(ledger, `${runId} ${step} ${process.pid} ${start} ${Date.now()}\n`);
  fsyncSync(ledger);
  process.stdout.write(`done ${runId} ${step}\n`);
}

cairn.workflow("job", async (ctx, n) => {
  const a = await ctx.step("a", async () => {
    effect(ctx.runId, "a", Date.now());
    return { n, pid: process.pid };
  });
  const b = await ctx.step("b", async () => {
    const start = Date.now();
    await new Promise((resolve) => setTimeout(resolve, stepMs));
    effect(ctx.runId, "b", start);
    return { v: a.n * 2, pid: process.pid };
  });
  return b.v;
});

await cairn.launch();
process.stdout.write(`launched ${runtimeOf(cairn).executorId}\n`);
process.stdin.resume();
process.stdin.on("end", async () => {
  await cairn.shutdown();
  closeSync(ledger);
  process.exit(0);
});

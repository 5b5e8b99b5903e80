// An executor process for the queue crash test (queue-crash.test.ts): plain ESM over the BUILT
// package. It declares queue "work", serves it, and runs workflow "job" (two steps, each an effect
// written to a ledger file and fsynced) until killed or told to stop (stdin closes).
//
// Environment: DB (SQLite path or postgres:// URL), LEDGER (file), LEASE_MS, STEP_MS (how long
// step "b" works), WORKER_CONCURRENCY.
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
cairn.queue("work", { workerConcurrency: Number(process.env.WORKER_CONCURRENCY ?? "8") });

function effect(runId, step) {
  // fsynced before the step returns: a line here is an effect that happened.
  writeSync(ledger, `${runId} ${step} ${process.pid}\n`);
  fsyncSync(ledger);
  process.stdout.write(`done ${runId} ${step}\n`);
}

cairn.workflow("job", async (ctx, n) => {
  const a = await ctx.step("a", async () => (effect(ctx.runId, "a"), n));
  const b = await ctx.step("b", async () => {
    await new Promise((resolve) => setTimeout(resolve, stepMs));
    effect(ctx.runId, "b");
    return a * 2;
  });
  return b;
});

await cairn.launch();
process.stdout.write(`launched ${runtimeOf(cairn).executorId}\n`);
process.stdin.resume();
process.stdin.on("end", async () => {
  await cairn.shutdown();
  closeSync(ledger);
  process.exit(0);
});

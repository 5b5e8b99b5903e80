import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Cairn, PoisonRunError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { faultWorkers, readFaultLedger, scratchDir, type FaultWorker } from "./fault-harness.js";
import { storeOf } from "../../src/internal.js";

/**
 * A poison run: its second step SIGKILLs whatever process runs it, every time. Issue 8, point 10:
 * it was recovered forever, killing each executor that took it. After `maxRecoveryAttempts`
 * recoveries it is parked as failed with a PoisonRunError, for a person to `cairn resume`.
 */

const MAX_RECOVERY = 2;

describe.each(BACKENDS)("a run that crashes its executor on every recovery, on $name", (backend) => {
  const workers = faultWorkers();

  it(`is parked as failed (POISON_RUN) after maxRecoveryAttempts (${MAX_RECOVERY}) recoveries, and resume gives it a fresh allowance`, async () => {
    const database = await backend.freshDatabase();
    const ledger = join(scratchDir("poison"), "ledger.txt");
    const runId = "poison-1";
    const spawn = (): FaultWorker => workers.spawn({ database, ledger, prefix: "p", maxRecovery: MAX_RECOVERY, poison: runId, pollMs: 20 });
    const observer = new Cairn({ database, onError: () => undefined });
    try {
      let worker = spawn();
      await worker.line(/^launched /);
      worker.send("poison");
      let crashes = 0;
      for (;;) {
        let died = false;
        const outcome = await Promise.race([worker.exited.then(() => (died = true) && ("died" as const)), failed(observer, runId, () => died)]);
        if (outcome !== "died") break;
        crashes++;
        expect(crashes, "crashes before the run was parked").toBeLessThanOrEqual(MAX_RECOVERY + 1);
        worker = spawn();
      }
      const error = (await observer.run(runId).status()).error;
      expect(error).toBeInstanceOf(PoisonRunError);
      expect((error as PoisonRunError).code).toBe("POISON_RUN");
      expect((error as Error).message).toContain(`cairn resume ${runId}`);
      expect(crashes).toBe(MAX_RECOVERY + 1);
      // The crashing step ran once in the first life and once per recovery allowed.
      expect(readFaultLedger(ledger).filter((l) => l.seq === 1)).toHaveLength(MAX_RECOVERY + 1);
      console.log(`[faults] poison run on ${backend.name}: parked after ${crashes} crashes`);

      // `resume` re-enqueues it with a fresh allowance: the next executor takes it (and dies again).
      expect(await observer.resume(runId)).toBe(true);
      const row = await storeOf(observer).getRun(runId);
      expect(row?.recoveryBase).toBe(row?.recoveries);
      await worker.kill();
    } finally {
      await observer.shutdown();
    }
  });
});

async function failed(observer: Cairn, runId: string, stop: () => boolean): Promise<"failed" | "stopped"> {
  for (;;) {
    if (stop()) return "stopped";
    const run = await storeOf(observer).getRun(runId);
    if (run?.status === "failed") return "failed";
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { doubledSteps, faultWorkers, readFaultLedger, scratchDir, sum } from "./fault-harness.js";
import { storeOf } from "../../src/internal.js";

/**
 * Two executors on one host and one SQLite file, one of them in its own pid namespace (what
 * containers sharing a volume and a hostname are). Issue 8, point 7: each read "no process with
 * that pid here" as "dead" and took the other's live runs at once. A pid is now compared only
 * within the namespace (and boot) that issued it; across namespaces the lease decides.
 */

const RUNS = 8;
const STEPS = 30;
const WRAPPER = ["unshare", "--pid", "--fork", "--kill-child"];

function unshareWorks(): boolean {
  const probe = spawnSync(WRAPPER[0]!, [...WRAPPER.slice(1), "true"], { timeout: 10_000 });
  return probe.status === 0;
}

const canUnshare = unshareWorks();
if (!canUnshare) console.warn("[faults] the pid-namespace test is skipped: `unshare --pid --fork` failed here (it needs root)");

describe.skipIf(!canUnshare)("executors in different pid namespaces (unshare --pid) on one SQLite file", () => {
  const workers = faultWorkers();

  it("take over none of each other's live runs", async () => {
    const dir = scratchDir("pidns");
    const database = join(dir, "cairn.db");
    const ledger = join(dir, "ledger.txt");
    const host = workers.spawn({ database, ledger, prefix: "host", runs: RUNS, steps: STEPS, stepMs: 15, pollMs: 20 });
    await host.line(/^launched /);
    const contained = workers.spawn({ database, ledger, prefix: "ns", runs: RUNS, steps: STEPS, stepMs: 15, pollMs: 20, wrapper: WRAPPER });
    await contained.line(/^launched /);
    host.send("start 1");
    contained.send("start 1");
    for (const [worker, prefix] of [
      [host, "host"],
      [contained, "ns"],
    ] as const) {
      const results = await worker.results(`${prefix}-`, RUNS, 40_000);
      for (const [id, outcome] of results) expect(outcome, id).toBe("ok");
    }
    for (const worker of [host, contained]) await worker.shutdown();

    const observer = new Cairn({ database, onError: () => undefined });
    try {
      const runs = await storeOf(observer).listRuns({ limit: 100 });
      expect(runs).toHaveLength(2 * RUNS);
      const takenOver = runs.filter((r) => r.recoveries > 0).map((r) => r.id);
      const doubled = sum([...doubledSteps(readFaultLedger(ledger), "").values()]);
      console.log(`[faults] pid namespaces: ${JSON.stringify({ takenOver: takenOver.length, doubled })}`);
      expect(takenOver, "runs taken over from a live executor").toEqual([]);
      expect(doubled).toBe(0);
    } finally {
      await observer.shutdown();
    }
  });
});

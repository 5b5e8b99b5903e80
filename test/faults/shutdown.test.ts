import { describe, expect, it } from "vitest";
import { Cairn, CairnError, InvalidSpecError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { noScratchCluster, startScratchCluster } from "./fault-harness.js";

describe.each(BACKENDS)("after shutdown(), on $name", (backend) => {
  it("status(), result() and getEvent() reject with Cairn's own error, not the driver's TypeError", async () => {
    const database = await backend.freshDatabase();
    const cairn = new Cairn({ database, onError: () => undefined });
    const wf = cairn.workflow("one", async (ctx) => ctx.step("s", () => 1));
    await cairn.launch();
    const run = await wf.start(undefined, { id: "r1" });
    expect(await run.result()).toBe(1);
    await cairn.shutdown();
    for (const call of [() => run.status(), () => run.result(), () => cairn.getEvent("r1", "k")]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CairnError);
      expect((error as CairnError).message).toContain("shut down");
    }
  });
});

describe("maxRecoveryAttempts", () => {
  it("must be an integer ≥ 0", () => {
    expect(() => new Cairn({ database: ":memory:", maxRecoveryAttempts: -1 })).toThrow(InvalidSpecError);
    expect(() => new Cairn({ database: ":memory:", maxRecoveryAttempts: 1.5 })).toThrow(/maxRecoveryAttempts/);
  });
});

describe.skipIf(noScratchCluster() !== undefined)("shutdown() with the PostgreSQL server gone", () => {
  it("returns within its bound while runs are in flight", async () => {
    const cluster = startScratchCluster();
    try {
      const cairn = new Cairn({ database: cluster.url, onError: () => undefined, pollIntervalMs: 50 });
      const wf = cairn.workflow("slow", async (ctx) => {
        for (let i = 0; i < 1000; i++) await ctx.step(`s${i}`, () => new Promise((resolve) => setTimeout(() => resolve(i), 5)));
        return "done";
      });
      await cairn.launch();
      for (let i = 0; i < 5; i++) await wf.start(undefined, { id: `slow-${i}` });
      await new Promise((resolve) => setTimeout(resolve, 200));
      cluster.stop();
      const began = Date.now();
      await cairn.shutdown();
      expect(Date.now() - began).toBeLessThan(12_000);
    } finally {
      cluster.stop();
    }
  });
});

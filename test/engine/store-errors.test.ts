import { describe, expect, it } from "vitest";
import { durableRun } from "../../src/engine/durable-run.js";
import type { WriteOp } from "../../src/store/store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/** A row that collides with itself: whatever commits it breaks a primary key, every time. */
const collidingRows = (id: string): WriteOp[] =>
  [1, 2].map(() => ({
    type: "insert",
    table: "cairn_artifacts",
    values: { id, name: "x", media_type: "text/plain", hash: "h", size: 1, run_id: id, seq: 0, created_at: 0 },
  }));

describe.each(BACKENDS)("a write the database refuses on $name", (backend) => {
  const env = cairnFactory(backend);

  it("fails only its own run (not the others committed with it), and fails it instead of retrying forever", async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 20 });
    const doomed = cairn.workflow("doomed", async (ctx) =>
      durableRun(ctx).operation({ kind: "step", name: "collide", execute: () => 1, alsoWrite: () => collidingRows(ctx.runId) }),
    );
    const healthy = cairn.workflow("healthy", async (ctx) => {
      let total = 0;
      for (let i = 0; i < 20; i++) total += await ctx.step(`s${i}`, () => i);
      return total;
    });
    await cairn.launch();
    const bad = await doomed.start(undefined, { id: "doomed" });
    const goods = await Promise.all([1, 2, 3].map((i) => healthy.start(undefined, { id: `healthy-${i}` })));
    for (const good of goods) expect(await good.result()).toBe(190);
    const error = (await bad.result().catch((e: unknown) => e)) as Error;
    expect(error.name).toBe("CairnError");
    expect(error.message).toContain("refused the writes of run doomed 5 times");
  });
});

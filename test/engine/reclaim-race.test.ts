import { describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import type { WriteOp } from "../../src/store/store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/**
 * A run that unloads to wait, and whose wait is over at once (a message already in its inbox, a
 * timer due), is claimable as soon as the suspend commits — before the execution that wrote it has
 * heard back from the store and let go. The executor's next claim pass may take the run then. That
 * claim must load the run once the old execution has let go, not drop it because an execution of
 * it is still in memory: the run would stay `running` under this executor with nothing running it.
 * Found by the replay fuzzer on PostgreSQL (runs with selects over self-sent messages stayed
 * `running` after a recovery); forced here by holding back the suspend's acknowledgement.
 */
describe.each(BACKENDS)("a run claimed again before its suspend is acknowledged, on $name", (backend) => {
  const env = cairnFactory(backend);

  it("is loaded once the old execution lets go, and finishes", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 20 });
    const store = storeOf(cairn);
    const commit = store.commit.bind(store);
    let held = 0;
    // The suspend reaches the database; its caller hears of it only later (a busy event loop, a
    // slow socket): the claim passes meanwhile see a waiting run whose wake-up is due.
    store.commit = async (fence, ops: WriteOp[]) => {
      await commit(fence, ops);
      if (ops.some((op) => op.type === "suspend")) {
        held++;
        await new Promise((resolve) => setTimeout(resolve, 400));
      }
    };
    const wf = cairn.workflow("naps", async (ctx) => {
      let total = 0;
      for (let i = 0; i < 3; i++) {
        await ctx.sleep(`nap${i}`, 100);
        total += await ctx.step(`count${i}`, () => 1);
      }
      return total;
    });
    await cairn.launch();
    const handle = await wf.start(undefined, { id: "naps" });
    const outcome = await Promise.race([handle.result(), new Promise((resolve) => setTimeout(() => resolve("stuck"), 10_000))]);
    expect(held).toBeGreaterThan(0);
    expect(outcome).toBe(3);
  });
});

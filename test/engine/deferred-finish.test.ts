import { generateText } from "ai";
import { describe, expect, it } from "vitest";
import { InvalidSpecError } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
import type { DurabilityWatermark } from "../../src/store/store.js";
import { MockLanguageModel } from "../ai/sdk-matrix.js";
import { answer } from "../ai/scripted-model.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// `deferFinishFsync`: a succeeded finish commits without waiting for its fsync / WAL flush, and is
// not part of the durability watermark (its loss costs a replay, never an effect, so no operation
// waits for a barrier on its account). Observed here through the store's counters, on both
// backends; the loss itself — a server crash erasing finishes that are then replayed, not repeated —
// is test/faults/deferred-finish.test.ts.

describe.each(BACKENDS)("deferred finishes on $name", (backend) => {
  const env = cairnFactory(backend);
  const counters = (w: DurabilityWatermark) => ({ deferred: w.deferred, durable: w.durable, rederivable: w.rederivable });

  it("a succeeded finish commits without waiting, and no later operation waits for a barrier on its account", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    const atEffects: ReturnType<typeof counters>[] = [];
    const quick = cairn.workflow("df-quick", async (ctx, n: number) => (await ctx.step("double", () => n * 2)) + 1, { deferFinishFsync: true });
    const other = cairn.workflow("df-other", async (ctx) => {
      await ctx.step("effect", () => void atEffects.push(counters(watermark)));
      return "done";
    });
    await cairn.launch();
    expect(await (await quick.start(20)).result()).toBe(41);
    expect(await (await quick.start(1)).result()).toBe(3);
    expect(counters(watermark)).toEqual({ deferred: 0, durable: 0, rederivable: 2 });
    // The run's outcome is in the database as any finish is.
    const { rows } = await cairn.query("SELECT status FROM cairn_runs WHERE workflow = 'df-quick' ORDER BY status");
    expect(rows).toEqual([{ status: "succeeded" }, { status: "succeeded" }]);
    // Another run's effect does not wait for a barrier: nothing counted is at risk.
    expect(await (await other.start(undefined)).result()).toBe("done");
    expect(atEffects).toEqual([{ deferred: 0, durable: 0, rederivable: 2 }]);
    expect(counters(watermark)).toEqual({ deferred: 0, durable: 0, rederivable: 2 });
  });

  it("a finish carrying a sleep's end commits without waiting too (the batch of a woken run)", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    // A short sleep ends in memory; its end rides with the run's next commit, here the finish.
    const napper = cairn.workflow(
      "df-nap",
      async (ctx, n: number) => {
        const value = await ctx.step("value", () => n);
        await ctx.sleep("nap", 1);
        return value * 3;
      },
      { deferFinishFsync: true },
    );
    await cairn.launch();
    // One at a time: a finish that meets another run's step in one group commit waits with it.
    for (const n of [1, 2, 3]) expect(await (await napper.start(n)).result()).toBe(n * 3);
    expect(counters(watermark)).toEqual({ deferred: 0, durable: 0, rederivable: 3 });
  });

  it("a run that returns while an operation is still acting finishes as every run does", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    let slowEnded = false;
    let endSlow!: () => void;
    const slowCanEnd = new Promise<void>((resolve) => (endSlow = resolve));
    const racer = cairn.workflow(
      "df-race",
      async (ctx) => {
        // The step loses the race and is still running when the workflow returns: its record may
        // never land, so a replay after an erased finish would run it again. (A plain timer keeps
        // the test short; a durable wait that loses to nothing would do as well.) The step ends
        // only once the test has looked: a 300 ms timer could end it first on a loaded machine.
        await Promise.race([
          ctx.step("slow", async () => {
            await slowCanEnd;
            return (slowEnded = true);
          }),
          new Promise((resolve) => setTimeout(resolve, 20)),
        ]);
        return "raced";
      },
      { deferFinishFsync: true },
    );
    await cairn.launch();
    expect(await (await racer.start(undefined)).result()).toBe("raced");
    expect(slowEnded).toBe(false);
    expect(counters(watermark)).toEqual({ deferred: 0, durable: 0, rederivable: 0 });
    endSlow();
  });

  it("by default, and for a failed run, the finish waits", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    const plain = cairn.workflow("df-plain", async (ctx) => ctx.step("one", () => 1));
    const failing = cairn.workflow(
      "df-failing",
      async (ctx) => {
        await ctx.step("one", () => 1);
        throw new Error("the workflow's own failure");
      },
      { deferFinishFsync: true },
    );
    await cairn.launch();
    expect(await (await plain.start(undefined)).result()).toBe(1);
    await expect((await failing.start(undefined)).result()).rejects.toThrow("the workflow's own failure");
    expect(counters(watermark)).toEqual({ deferred: 0, durable: 0, rederivable: 0 });
  });

  it("a run that deferred a model call's record finishes as every run does (its result may stand on that record)", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    const model = new MockLanguageModel({ doGenerate: async () => answer([{ type: "text", text: "ok" }]) });
    const agentLike = cairn.workflow(
      "df-model",
      async (ctx) => (await generateText({ model: ctx.model(model, { deferModelCallFsync: true }), prompt: "hi", maxRetries: 0 })).text,
      { deferFinishFsync: true },
    );
    await cairn.launch();
    expect(await (await agentLike.start(undefined)).result()).toBe("ok");
    // The model call was deferred (counted); the finish waited and is not rederivable.
    expect(counters(watermark)).toMatchObject({ deferred: 1, rederivable: 0 });
  });

  it("refuses a deferFinishFsync that is not a boolean, naming it", () => {
    const cairn = env.cairn(":memory:");
    const declare = () => cairn.workflow("df-bad", async () => 1, { deferFinishFsync: "yes" as never });
    expect(declare).toThrow(InvalidSpecError);
    expect(declare).toThrow(/deferFinishFsync/);
  });
});

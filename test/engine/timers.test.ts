import { describe, expect, it } from "vitest";
import { TimeoutError } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { runtimeOf, storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("durable timers on $name", (backend) => {
  const env = cairnFactory(backend);

  it("sleeps without holding the run in memory and wakes when the clock says so", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const calls: string[] = [];
    const wf = cairn.workflow("nap", async (ctx) => {
      await ctx.step("before", () => calls.push("before"));
      await ctx.sleep("cool-off", 60_000);
      const woke = await ctx.now();
      await ctx.step("after", () => calls.push("after"));
      return woke;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "nap" });
    await eventually(async () => (await run.status()).status === "waiting");
    expect((runtimeOf(cairn) as unknown as { executor: { loadedRunIds: string[] } }).executor.loadedRunIds).toEqual([]);
    clock.advance(59_999);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await run.status()).status).toBe("waiting");
    clock.advance(1);
    expect(await run.result()).toBe(clock.now());
    expect(calls).toEqual(["before", "after"]);
  });

  it("keeps the recorded wake-up time across a restart (sleepUntil too)", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const first = env.cairn(db, { clock });
    const body = async (ctx: import("../../src/index.js").WorkflowContext) => {
      await ctx.sleep("short", 1_000);
      await ctx.sleepUntil("until", new Date(clock.now() + 5_000));
      return "rested";
    };
    const wf = first.workflow("rest", body);
    await first.launch();
    const run = await wf.start(undefined, { id: "rest" });
    await eventually(async () => (await run.status()).status === "waiting");
    await first.shutdown();
    clock.advance(1_000);
    const second = env.cairn(db, { clock });
    second.workflow("rest", body);
    await second.launch();
    // The second sleep's target was computed when it began, after the first one ended.
    await eventually(async () => (await storeOf(second).loadJournal("rest")).length === 2);
    clock.advance(5_000);
    expect(await second.run("rest").result()).toBe("rested");
  });

  it("fails a run that passes its deadline, even while it sleeps", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const wf = cairn.workflow("slowpoke", async (ctx) => {
      await ctx.sleep("long", 10_000);
      return "late";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "slow", timeoutMs: 1_000 });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(1_000);
    const error = await run.result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as Error).message).toContain("deadline");
    // Resumed, it runs without the deadline that ended it, and finishes its sleep.
    await run.resume();
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(10_000);
    expect(await run.result()).toBe("late");
  });
});

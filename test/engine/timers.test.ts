import { describe, expect, it } from "vitest";
import { TimeoutError } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { runtimeOf, storeOf } from "../../src/internal.js";
import type { Fence, WriteOp } from "../../src/store/store.js";

/** Every commit made under a fence of `runId`, as the op types it carried, in order. */
function commitsOf(cairn: import("../../src/index.js").Cairn, runId: string): string[][] {
  const store = storeOf(cairn);
  const seen: string[][] = [];
  const commit = store.commit.bind(store);
  store.commit = ((fence: Fence | null, ops: WriteOp[], ...rest: unknown[]) => {
    if (fence?.runId === runId) seen.push(ops.map((op) => op.type));
    return (commit as (...args: unknown[]) => Promise<void>)(fence, ops, ...rest);
  }) as typeof store.commit;
  return seen;
}

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

  it("records a sleep's end with the run's next commit: a run that wakes and finishes commits once", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const wf = cairn.workflow("wake-once", async (ctx) => {
      await ctx.sleep("nap", 1_000);
      return "up";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "wake-once" });
    await eventually(async () => (await run.status()).status === "waiting");
    const commits = commitsOf(cairn, "wake-once");
    clock.advance(1_000);
    expect(await run.result()).toBe("up");
    // The sleep's end went with the finish, ahead of it, instead of a commit of its own.
    expect(commits).toEqual([["completion", "finish"]]);
    const [nap] = await storeOf(cairn).loadJournal("wake-once");
    expect(nap).toMatchObject({ kind: "sleep", name: "nap", completion: 0 });
  });

  it("commits a sleep's end before the run's next operation, and keeps the journal's order", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let woke!: () => void;
    const awake = new Promise<void>((resolve) => (woke = resolve));
    const wf = cairn.workflow("wake-busy", async (ctx) => {
      await ctx.sleep("nap", 1_000);
      woke();
      await released; // work that commits nothing, for as long as it takes
      await ctx.step("after", () => "done");
      await ctx.sleep("again", 1_000);
      return ctx.step("last", () => "end");
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "wake-busy" });
    await eventually(async () => (await run.status()).status === "waiting");
    const commits = commitsOf(cairn, "wake-busy");
    clock.advance(1_000);
    await awake;
    // Nothing committed yet: a crash now would replay the sleep into the same end.
    expect(commits).toEqual([]);
    release();
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(1_000);
    expect(await run.result()).toBe("end");
    // Each sleep's end landed alone before the step past it acted; the finish went alone.
    expect(commits).toEqual([["completion"], ["step"], ["step"], ["suspend"], ["completion"], ["step"], ["finish"]]);
    const journal = await storeOf(cairn).loadJournal("wake-busy");
    expect(journal.map((row) => [row.name, row.completion])).toEqual([
      ["nap", 0],
      ["after", 1],
      ["again", 2],
      ["last", 3],
    ]);
  });

  it("lands a sleep's end before a transaction, a receive or a select records past it", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const store = storeOf(cairn);
    // What the journal held when each statement that records on its own began.
    const seen: [string, (number | null)[]][] = [];
    const snapshot = async (what: string) => seen.push([what, (await store.loadJournal("lands")).map((row) => row.completion)]);
    const { transaction, receive, settleSelect } = store;
    store.transaction = async (...args) => (await snapshot("transaction"), transaction.apply(store, args));
    store.receive = async (...args) => (await snapshot("receive"), receive.apply(store, args));
    store.settleSelect = async (...args) => (await snapshot("select"), settleSelect.apply(store, args as never)) as never;
    const wf = cairn.workflow("lands", async (ctx) => {
      await ctx.sleep("a", 1_000);
      await ctx.transaction("tx", (sql) => sql.query("SELECT 1 AS one"));
      await ctx.sleep("b", 1_000);
      await ctx.recv("nothing", { timeoutMs: 0 });
      await ctx.sleep("c", 1_000);
      await ctx.select("first", { late: { timeoutMs: 0 } });
      return "done";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "lands" });
    for (const sleep of ["a", "b", "c"]) {
      // Asleep on this sleep (its start recorded, the run unloaded) before the clock moves on.
      await eventually(async () => (await run.status()).status === "waiting" && (await store.loadJournal("lands")).some((row) => row.name === sleep));
      clock.advance(1_000);
    }
    expect(await run.result()).toBe("done");
    // Each saw the sleep before it ended (its completion set), never a later record without it.
    expect(seen).toEqual([
      ["transaction", [0]],
      ["receive", [0, 1, 2]],
      ["select", [0, 1, 2, 3, 4]],
    ]);
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

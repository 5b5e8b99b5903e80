import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("leases and fencing on $name", (backend) => {
  const env = cairnFactory(backend);

  it("takes over the runs of an executor whose lease lapsed, and fences the old owner out", async () => {
    // Two clocks: the new owner's moves past the lease; the old owner's stands still, as a paused
    // or partitioned process's would, so it never sees the new owner as dead.
    const clock = new ManualClock();
    const oldClock = new ManualClock(clock.now());
    const db = await env.database();
    const executions: string[] = [];
    let releaseHung!: () => void;
    const hung = new Promise<void>((resolve) => (releaseHung = resolve));

    // The old owner is alive (same process, so no pid check can call it dead) but stops
    // heartbeating: only the lease can decide.
    const oldOwner = env.cairn(db, { clock: oldClock, leaseMs: 10_000 });
    const wf = oldOwner.workflow("job", async (ctx) => {
      await ctx.step("work", async () => {
        executions.push("old");
        await hung;
        return "old result";
      });
      return ctx.step("after", () => "finished");
    });
    await oldOwner.launch();
    await wf.start(undefined, { id: "job" });
    await eventually(() => executions.length === 1);

    const newOwner = env.cairn(db, { clock, leaseMs: 10_000, pollIntervalMs: 20 });
    newOwner.workflow("job", async (ctx) => {
      const work = await ctx.step("work", () => {
        executions.push("new");
        return "new result";
      });
      return `${work} then ${await ctx.step("after", () => "finished")}`;
    });
    await newOwner.launch();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(executions).toEqual(["old"]); // the lease has not lapsed yet
    clock.advance(10_001);
    expect(await newOwner.run("job").result()).toBe("new result then finished");
    expect((await storeOf(newOwner).getRun("job"))?.recoveries).toBe(1);

    // The old owner's step now finishes; its checkpoint must be refused.
    releaseHung();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const journal = await storeOf(newOwner).loadJournal("job");
    expect(journal.map((s) => s.output)).toEqual(['"new result"', '"finished"']);
    expect(executions).toEqual(["old", "new"]);
  });
});

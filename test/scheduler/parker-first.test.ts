import { describe, expect, it } from "vitest";
import type { Cairn, WorkflowContext } from "../../src/index.js";
import { runtimeOf } from "../../src/internal.js";
import { PARKER_GRACE_MS } from "../../src/store/statements.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * A sleeping run's wake-up goes to the executor that parked it (PostgreSQL: statements.ts,
 * ParkerFirst): that executor holds it warm and continues it from memory, where any other would
 * replay its journal. Others may take it once it is `PARKER_GRACE_MS` overdue, or at once when no
 * executor row shows its parker any more. Replays are counted by entries into the workflow's body.
 */
describe.each(BACKENDS)("due runs go to their parker first on $name", (backend) => {
  const env = cairnFactory(backend);
  const postgresOnly = it.skipIf(backend.name !== "postgres");

  const napper = (entries: string[], where: string) => async (ctx: WorkflowContext, naps: number) => {
    entries.push(where);
    for (let i = 0; i < naps; i++) {
      await ctx.step(`work-${i}`, () => i);
      await ctx.sleep(`nap-${i}`, 40);
    }
    return naps;
  };

  function loaded(cairn: Cairn): string[] {
    return (runtimeOf(cairn) as unknown as { executor: { loadedRunIds: string[] } }).executor.loadedRunIds;
  }

  postgresOnly("two executors' sleeping runs each wake on the executor that parked them, warm", async () => {
    const db = await env.database();
    const entries: string[] = [];
    const a = env.cairn(db);
    const b = env.cairn(db);
    a.workflow("napper", napper(entries, "a"));
    b.workflow("napper", napper(entries, "b"));
    // A client's starts: each wakes one of the two executors at random (a launched Cairn would run its own).
    const client = env.cairn(db);
    const wf = client.workflow("napper", napper(entries, "client"));
    await a.launch();
    await b.launch();
    const runs = [];
    for (let k = 0; k < 8; k++) runs.push(await wf.start(6, { id: `napper-${k}` }));
    expect(await Promise.all(runs.map((run) => run.result()))).toEqual(runs.map(() => 6));
    // Both executors ran some of the runs (the channel left on each run is its last parker's).
    const { rows } = await a.query("SELECT count(DISTINCT wake_channel)::int AS n FROM cairn_runs");
    expect(rows[0]!.n).toBe(2);
    // Each run entered its body once: 5 wake-ups each, none replayed. (Before, each wake-up went to
    // whichever executor's timer fired first: about half of them replayed.)
    expect(entries).toHaveLength(8);
  });

  postgresOnly("a run whose parker is alive but full is taken by another executor once it is the grace overdue", async () => {
    const db = await env.database();
    const clock = new ManualClock();
    const entries: string[] = [];
    const here = env.cairn(db, { clock, maxConcurrentRuns: 1, pollIntervalMs: 20 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const blocker = here.workflow("blocker", async (ctx) => ctx.step("hold", () => released));
    const wf = here.workflow("napper", napper(entries, "here"));
    await here.launch();
    const run = await wf.start(1, { id: "napper" });
    await eventually(async () => (await run.status()).status === "waiting" && !loaded(here).includes("napper"));
    await blocker.start(undefined, { id: "blocker" });
    await eventually(() => loaded(here).includes("blocker"));
    const there = env.cairn(db, { clock, pollIntervalMs: 20 });
    there.workflow("napper", napper(entries, "there"));
    await there.launch();
    clock.advance(40); // due now, but its parker's: the other executor's polls leave it alone
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await run.status()).status).toBe("waiting");
    clock.advance(PARKER_GRACE_MS);
    expect(await run.result()).toBe(1);
    expect(entries).toEqual(["here", "there"]);
    release();
  });

  postgresOnly("a run whose parker shut down is taken by another executor at its wake-up, with no grace", async () => {
    const db = await env.database();
    const clock = new ManualClock();
    const entries: string[] = [];
    const here = env.cairn(db, { clock });
    const wf = here.workflow("napper", napper(entries, "here"));
    await here.launch();
    const run = await wf.start(1, { id: "napper" });
    await eventually(async () => (await run.status()).status === "waiting" && !loaded(here).includes("napper"));
    await here.shutdown(); // its executor row goes: nobody holds the run warm
    const there = env.cairn(db, { clock });
    there.workflow("napper", napper(entries, "there"));
    await there.launch();
    clock.advance(40);
    expect(await there.run("napper").result()).toBe(1);
    expect(entries).toEqual(["here", "there"]);
  });
});

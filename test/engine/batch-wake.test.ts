import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

/** How many runs fall due together (CAIRN_TEST_WAKE_RUNS for a larger count; CI keeps it quick). */
const RUNS = Number(process.env.CAIRN_TEST_WAKE_RUNS ?? 500);

describe.each(BACKENDS)("many runs falling due at once on $name", (backend) => {
  const env = cairnFactory(backend);

  it(`wakes ${RUNS} runs sleeping to one instant, across two executors with less room than runs; journals intact`, async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const after = new Map<number, number>();
    const body = async (ctx: import("../../src/index.js").WorkflowContext, n: number) => {
      const before = await ctx.step("before", () => n * 2);
      await ctx.sleep("nap", 60_000);
      const later = await ctx.step("after", () => {
        after.set(n, (after.get(n) ?? 0) + 1);
        return before + 1;
      });
      return later;
    };
    // Each executor holds at most 150 runs: the wake-up comes in several claims, fed as runs let go.
    const a = env.cairn(db, { clock, maxConcurrentRuns: 150 });
    const b = env.cairn(db, { clock, maxConcurrentRuns: 150 });
    const wf = a.workflow("napper", body);
    b.workflow("napper", body);
    await a.launch();
    await b.launch();
    const handles = await wf.startMany(Array.from({ length: RUNS }, (_, i) => ({ input: i, options: { id: `nap-${i}` } })));
    const store = storeOf(a);
    const count = async (status: string): Promise<number> =>
      Number((await store.query("SELECT count(*) AS n FROM cairn_runs WHERE status = $1", [status])).rows[0]?.n);
    await eventually(async () => (await count("waiting")) === RUNS, 60_000);

    clock.advance(60_000);
    const results = await Promise.all(handles.map((h) => h.result()));
    expect(results).toEqual(Array.from({ length: RUNS }, (_, i) => i * 2 + 1));
    // Every run's after-step ran exactly once (no run was executed by both executors).
    expect([...after.values()].every((times) => times === 1)).toBe(true);
    expect(after.size).toBe(RUNS);
    expect(await count("succeeded")).toBe(RUNS);

    // The journals, read back in one batch and one by one, agree and hold the three records in order.
    const ids = handles.map((h) => h.id);
    const batched = await Promise.all(ids.map((id) => store.loadJournal(id)));
    for (const [i, journal] of batched.entries()) {
      expect(journal.map((s) => [s.seq, s.name, s.kind, s.status])).toEqual([
        [0, "before", "step", "succeeded"],
        [1, "nap", "sleep", "succeeded"],
        [2, "after", "step", "succeeded"],
      ]);
      // The sleep's completion was recorded when it woke, after the first step's.
      expect(journal[1]!.completion).toBeGreaterThan(journal[0]!.completion ?? -1);
      expect(journal[2]!.output).toBe(String(i * 2 + 1));
    }
    expect(await store.loadJournal(ids[7]!)).toEqual(batched[7]);
  }, 180_000);

  it("a parent waiting for children that all finish together wakes once they have", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const child = cairn.workflow("kid", async (ctx, n: number) => {
      await ctx.sleep("nap", 1_000);
      return n;
    });
    const parent = cairn.workflow("parent", async (ctx, n: number) => {
      const kids = await Promise.all(Array.from({ length: n }, (_, i) => ctx.child(child, i)));
      const results = await Promise.all(kids.map((k) => k.result()));
      return results.reduce((x, y) => x + y, 0);
    });
    await cairn.launch();
    const parents = await parent.startMany([
      { input: 20, options: { id: "p1" } },
      { input: 30, options: { id: "p2" } },
    ]);
    const store = storeOf(cairn);
    await eventually(async () => (await store.listRuns({ status: "waiting", limit: 1000 })).length === 52, 60_000);
    clock.advance(1_000);
    expect(await parents[0]!.result()).toBe(190);
    expect(await parents[1]!.result()).toBe(435);
  }, 120_000);
});

import { describe, expect, it } from "vitest";
import type { Cairn, CairnOptions, RunHandle, Workflow } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { runtimeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

// A dispatch decides many runs in one statement (dispatch-sql.ts, batchSql). Every run here is
// queued before any executor starts, so the first pass of each executor decides a whole batch at
// once; the runs then hold their slots, and the decisions read back from SQL must obey every limit.
describe.each(BACKENDS)("batch dispatch on $name", (backend) => {
  const env = cairnFactory(backend);

  async function setup(queue: Parameters<Cairn["queue"]>[1], specs: Omit<CairnOptions, "database">[]) {
    const db = await env.database();
    let release!: () => void;
    const opened = new Promise<void>((resolve) => (release = resolve));
    const clock = new ManualClock();
    const cairns = specs.map((spec) => {
      const cairn = env.cairn(db, { clock, pollIntervalMs: 30, ...spec });
      cairn.queue("q", queue);
      const job = cairn.workflow("job", async (ctx, n: number) => ctx.step("hold", async () => (await opened, n)));
      return { cairn, job };
    });
    return { cairns, release, clock };
  }

  async function enqueue(job: Workflow<number, number>, keys: (string | undefined)[]) {
    const handles: RunHandle<unknown>[] = [];
    for (const [i, key] of keys.entries()) handles.push(await job.enqueue("q", i, { id: `b-${String(i).padStart(3, "0")}`, partitionKey: key }));
    return handles;
  }

  /** Decisions once dispatch has settled at `expected` (then a few more polls: no more may come). */
  async function settled(cairn: Cairn, expected: number) {
    const read = async () =>
      (await cairn.query("SELECT run_id, executor_id, policy, partition_key, dispatched_at FROM cairn_queue_runs WHERE dispatched_at IS NOT NULL")).rows;
    await eventually(async () => (await read()).length >= expected);
    await new Promise((resolve) => setTimeout(resolve, 200));
    return read();
  }

  const perExecutor = (rows: Record<string, unknown>[]) => {
    const counts = new Map<string, number>();
    for (const row of rows) counts.set(String(row.executor_id), (counts.get(String(row.executor_id)) ?? 0) + 1);
    return counts;
  };

  it("never more than workerConcurrency per executor, nor its capacity, in one batch", async () => {
    const { cairns, release } = await setup({ workerConcurrency: 4 }, [{ maxConcurrentRuns: 10 }, { maxConcurrentRuns: 3 }]);
    const handles = await enqueue(
      cairns[0]!.job,
      Array.from({ length: 30 }, () => undefined),
    );
    for (const { cairn } of cairns) await cairn.launch();
    const rows = await settled(cairns[0]!.cairn, 7);
    const counts = perExecutor(rows);
    expect(rows).toHaveLength(7);
    expect(counts.get(runtimeOf(cairns[0]!.cairn).executorId)).toBe(4); // workerConcurrency
    expect(counts.get(runtimeOf(cairns[1]!.cairn).executorId)).toBe(3); // capacity
    // Every decision is in SQL: who took which run, when, under which policy; FIFO took the oldest.
    expect(rows.every((r) => r.policy === "fifo" && r.dispatched_at !== null)).toBe(true);
    expect(rows.map((r) => String(r.run_id)).sort()).toEqual(handles.slice(0, 7).map((h) => h.id));
    release();
    await Promise.all(handles.map((h) => h.result()));
  });

  it("never more than the global concurrency, across executors", async () => {
    const { cairns, release } = await setup({ concurrency: 5, workerConcurrency: 4, policy: "least_loaded" }, [{}, {}]);
    const handles = await enqueue(
      cairns[0]!.job,
      Array.from({ length: 20 }, () => undefined),
    );
    for (const { cairn } of cairns) await cairn.launch();
    const rows = await settled(cairns[0]!.cairn, 5);
    expect(rows).toHaveLength(5);
    for (const n of perExecutor(rows).values()) expect(n).toBeLessThanOrEqual(4);
    release();
    await Promise.all(handles.map((h) => h.result()));
  });

  it("never more than the rate limit's remaining allowance", async () => {
    const { cairns, release, clock } = await setup({ rateLimit: { limit: 6, periodMs: 60_000 } }, [{}]);
    const handles = await enqueue(
      cairns[0]!.job,
      Array.from({ length: 15 }, () => undefined),
    );
    await cairns[0]!.cairn.launch();
    expect(await settled(cairns[0]!.cairn, 6)).toHaveLength(6);
    release();
    clock.advance(60_001);
    expect(await settled(cairns[0]!.cairn, 12)).toHaveLength(12);
    clock.advance(60_001);
    await Promise.all(handles.map((h) => h.result()));
  });

  it("per partition key: never more than its limit, and the light key is served in the same batch", async () => {
    const { cairns, release } = await setup({ partitionBy: { concurrency: 2 } }, [{}]);
    const keys = [...Array.from({ length: 12 }, () => "heavy"), "light", ...Array.from({ length: 6 }, () => "mid"), undefined, undefined];
    const handles = await enqueue(cairns[0]!.job, keys);
    await cairns[0]!.cairn.launch();
    const rows = await settled(cairns[0]!.cairn, 7);
    const byKey = (key: string | null) => rows.filter((r) => (r.partition_key ?? null) === key).length;
    expect(byKey("heavy")).toBe(2);
    expect(byKey("mid")).toBe(2);
    expect(byKey("light")).toBe(1);
    expect(byKey(null)).toBe(2);
    expect(rows).toHaveLength(7);
    release();
    await Promise.all(handles.map((h) => h.result()));
  });

  it("a batch larger than the shortlist keeps fair-sharing order: each key's first run before any key's second", async () => {
    const { cairns, release } = await setup({ concurrency: 6 }, [{}]);
    // 120 heavy runs fill the shortlist (100); the other keys' first runs are found by the skip scan.
    const keys = [...Array.from({ length: 120 }, () => "heavy"), "k1", "k2", "k3", "k4", "k5"];
    const handles = await enqueue(cairns[0]!.job, keys);
    await cairns[0]!.cairn.launch();
    const rows = await settled(cairns[0]!.cairn, 6);
    expect(rows).toHaveLength(6);
    // Fair sharing: one run of each of the six keys, not six heavy runs.
    expect(new Set(rows.map((r) => r.partition_key)).size).toBe(6);
    release();
    await Promise.all(handles.map((h) => h.result()));
  });
});

import { describe, expect, it } from "vitest";
import type { RunHandle } from "../../src/index.js";
import type { Cairn, CairnOptions } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { runtimeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

// Each dispatch policy decides as specified, read back from the decisions it left in SQL.
describe.each(BACKENDS)("dispatch policies on $name", (backend) => {
  const env = cairnFactory(backend);

  /** Runs that hold their executor until `release()`: load stays put while the policy decides. */
  function gate() {
    let release!: () => void;
    const opened = new Promise<void>((resolve) => (release = resolve));
    return { opened, release };
  }

  async function executors(queue: Parameters<Cairn["queue"]>[1], specs: Omit<CairnOptions, "database">[], opened: Promise<void>) {
    const db = await env.database();
    const cairns = specs.map((spec) => {
      const cairn = env.cairn(db, { pollIntervalMs: 30, ...spec });
      cairn.queue("q", queue);
      const job = cairn.workflow("job", async (ctx, n: number) => ctx.step("hold", async () => (await opened, n)));
      return { cairn, job, id: "" };
    });
    for (const e of cairns) {
      await e.cairn.launch();
      e.id = runtimeOf(e.cairn).executorId;
    }
    return cairns;
  }

  async function decisions(cairn: Cairn, count: number) {
    return eventually(async () => {
      const { rows } = await cairn.query(
        "SELECT run_id, executor_id, policy, partition_key FROM cairn_queue_runs WHERE dispatched_at IS NOT NULL ORDER BY dispatched_at, run_id",
      );
      return rows.length >= count ? rows : undefined;
    });
  }

  it("least_loaded: each run goes to the executor with the most free capacity", async () => {
    const { opened, release } = gate();
    const [small, big] = await executors({ policy: "least_loaded" }, [{ maxConcurrentRuns: 3 }, { maxConcurrentRuns: 6 }], opened);
    // Enqueued by the small one, which dispatches: FIFO would keep them; least-loaded sends them on.
    const handles: RunHandle<unknown>[] = [];
    for (let i = 0; i < 4; i++) handles.push(await small!.job.enqueue("q", i));
    const rows = await decisions(small!.cairn, 4);
    // Free capacity: big 6,5,4 > small 3, then 3 = 3 (a tie, by id).
    // (Decisions of one pass share a time, so they are counted, not ordered.)
    expect(rows.filter((r) => r.executor_id === big!.id).length).toBeGreaterThanOrEqual(3);
    expect(rows.every((r) => r.policy === "least_loaded")).toBe(true);
    release();
    await Promise.all(handles.map((h) => h.result()));
  });

  it("fifo: the oldest run first, to the dispatching executor while it has room", async () => {
    const { opened, release } = gate();
    const [only] = await executors({ concurrency: 1 }, [{}], opened);
    const handles: RunHandle<unknown>[] = [];
    for (let i = 0; i < 3; i++) handles.push(await only!.job.enqueue("q", i));
    release();
    await Promise.all(handles.map((h) => h.result()));
    const rows = await decisions(only!.cairn, 3);
    expect(rows.map((r) => r.run_id)).toEqual(handles.map((h) => h.id));
    expect(rows.every((r) => r.executor_id === only!.id && r.policy === "fifo")).toBe(true);
  });

  it("locality: runs stay with executors serving their partition until localityWaitMs, then go to any", async () => {
    const { opened, release } = gate();
    const clock = new ManualClock();
    const [eu, us] = await executors(
      { policy: "locality", localityWaitMs: 60_000 },
      [
        { clock, serve: { partitions: ["eu"] } },
        { clock, serve: { partitions: ["us"] } },
      ],
      opened,
    );
    const handles: RunHandle<unknown>[] = [];
    for (const key of ["eu", "us", "eu", "us"]) handles.push(await eu!.job.enqueue("q", 0, { partitionKey: key }));
    const asia = await eu!.job.enqueue("q", 0, { partitionKey: "asia" });
    const rows = await decisions(eu!.cairn, 4);
    for (const row of rows) expect(row.executor_id).toBe(row.partition_key === "eu" ? eu!.id : us!.id);
    // Nobody serves "asia": it waits out the locality wait, then any executor may take it.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect((await asia.status()).status).toBe("enqueued");
    clock.advance(60_000);
    await decisions(eu!.cairn, 5);
    release();
    await Promise.all([...handles, asia].map((h) => h.result()));
  });

  it("a user policy in SQL: last in, first out", async () => {
    const { opened, release } = gate();
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 30 });
    cairn.queue("q", { concurrency: 1, policy: { sql: "SELECT run_id, executor_id FROM candidates ORDER BY enqueued_at DESC, run_id DESC" } });
    const order: number[] = [];
    const job = cairn.workflow("job", async (ctx, n: number) => ctx.step("s", async () => (await opened, order.push(n))));
    const handles: RunHandle<unknown>[] = [];
    // Ids that sort in enqueue order: two enqueues in one millisecond tie on enqueued_at, and the
    // policy's run_id tiebreak must then agree with the order they were enqueued in.
    for (let i = 0; i < 4; i++) handles.push(await job.enqueue("q", i, { id: `lifo-${i}` }));
    await cairn.launch();
    release();
    await Promise.all(handles.map((h) => h.result()));
    expect(order).toEqual([3, 2, 1, 0]);
    const { rows } = await cairn.query("SELECT DISTINCT policy FROM cairn_queue_runs");
    expect(rows).toEqual([{ policy: "sql" }]);
  });

  it("a user policy naming a column candidates lacks fails launch with InvalidSpecError", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    cairn.queue("q", { policy: { sql: "SELECT run_id, executor_id FROM candidates ORDER BY no_such_column" } });
    await expect(cairn.launch()).rejects.toMatchObject({ name: "InvalidSpecError", field: "policy.sql" });
  });
});

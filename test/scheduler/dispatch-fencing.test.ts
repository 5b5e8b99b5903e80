import { describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import type { Connection } from "../../src/store/connection.js";
import type { ExecutorRow } from "../../src/store/store.js";
import pg from "pg";
import { QUEUE_LOCK_KEY } from "../../src/scheduler/dispatch-sql.js";
import { Queues } from "../../src/scheduler/queues.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// A dispatch is a claim: it holds only while the dispatcher's own executor row exists (the row a
// peer removes when it presumes the dispatcher dead — paused past its lease, say). A woken
// dispatcher whose row is gone decides nothing: no run moves, no decision is recorded.
describe.each(BACKENDS)("dispatch fenced by the executor's row on $name", (backend) => {
  const env = cairnFactory(backend);

  /** An executor on another host (no pid can decide its life), registered at `t` with room for 4. */
  const liveExecutor = (t: number): ExecutorRow => ({
    id: "live",
    hostname: "elsewhere.invalid",
    pid: 1,
    backendPid: null,
    pidNamespace: null,
    appVersion: "default",
    startedAt: t,
    heartbeatAt: t,
    capacity: 4,
  });

  it("claimWith runs nothing under a removed id, and renews the heartbeat of a registered one", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    cairn.queue("q");
    const job = cairn.workflow("job", async () => 1);
    await job.enqueue("q", undefined, { id: "queued-1" });
    const store = storeOf(cairn);
    const t = Date.now();
    let ran = false;
    expect(await store.claimWith("ghost", t, async () => (ran = true))).toBeNull();
    expect(ran).toBe(false);

    await store.registerExecutor(liveExecutor(t));
    expect(await store.claimWith("live", t + 1_000, async (sql) => sql.all({ text: "SELECT 1 AS one" }, []))).toEqual([{ one: 1 }]);
    expect((await store.listExecutors()).find((e) => e.id === "live")).toMatchObject({ heartbeatAt: t + 1_000, capacity: 4 });

    // The queued run is the scheduler's: the core claim leaves it for the queue's dispatch.
    const claimed = await store.claimRuns({ executorId: "live", appVersion: null, now: t + 1_000, deadExecutors: [], workflows: ["job"], limit: 10 });
    expect(claimed).toEqual([]);
    expect((await store.getRun("queued-1"))?.status).toBe("enqueued");
  });

  /**
   * A run queued on "q", and a registered executor "live" (another host) serving it through a
   * dispatcher of its own, as another process would have.
   */
  async function queuedRunAndLivePeer() {
    const db = await env.database();
    const cairn = env.cairn(db);
    cairn.queue("q");
    const job = cairn.workflow("job", async () => 1);
    await job.enqueue("q", undefined, { id: "queued-1" });
    const store = storeOf(cairn);
    const t = Date.now();
    await store.registerExecutor(liveExecutor(t));
    const queues = new Queues(store);
    queues.declare("q");
    expect(await queues.register("live", t)).toBe(true);
    return { db, store, queues, t };
  }

  it("a dispatch by a removed id decides nothing, even for a live peer with room; the peer's own takes the run", async () => {
    const { store, queues, t } = await queuedRunAndLivePeer();

    // "ghost" has no row: on PostgreSQL its dispatch function decides for "live", then finds its
    // own row gone and rolls the decision back; on SQLite the claim transaction refuses at once.
    expect(await queues.dispatch("ghost", t, 30_000)).toBeNull();
    expect((await store.getRun("queued-1"))?.status).toBe("enqueued");
    const [row] = (await store.query("SELECT dispatched_at, executor_id FROM cairn_queue_runs WHERE run_id = $1", ["queued-1"])).rows;
    expect(row).toMatchObject({ dispatched_at: null, executor_id: null });

    const taken = await queues.dispatch("live", t + 1, 30_000);
    expect(taken?.decisions.map(({ queue, runId, executorId }) => ({ queue, runId, executorId }))).toEqual([
      { queue: "q", runId: "queued-1", executorId: "live" },
    ]);
    const run = await store.getRun("queued-1");
    expect(run).toMatchObject({ status: "running", executorId: "live" });
    // PostgreSQL: the dispatcher's own run comes back as getRun reads it, so it starts without a read.
    if (backend.name === "postgres") expect(taken?.decisions[0]?.loaded).toEqual({ run, hasSteps: false });
  });

  // SQLite: a dispatch riding the group commit that ends a run (Store.claimOnRelease) is fenced
  // the same way, commits with the group or not at all, and fails alone.
  it.skipIf(backend.name !== "sqlite")("a dispatch riding a run's end commits with it, runs nothing under a removed id, and fails alone", async () => {
    const { store, queues, t } = await queuedRunAndLivePeer();
    const finish = (runId: string) => store.commit(null, [{ type: "finish", runId, status: "succeeded", output: null, error: null, at: t }]);
    const ride = (executorId: string, claim: (db: Connection, now: number) => Promise<unknown>) =>
      new Promise<{ committed?: unknown; released?: readonly string[]; failed?: unknown }>((resolve) => {
        const stop = store.claimOnRelease!({
          executorId,
          now: () => t + 1,
          claim,
          committed: (result, released) => (stop(), resolve({ committed: result, released })),
          failed: (error) => (stop(), resolve({ failed: error })),
        });
      });

    // A removed id: the claim does not run; the run's end commits all the same.
    let ran = false;
    const ghost = ride("ghost", async () => (ran = true));
    await finish("gone-1");
    expect(await ghost).toEqual({ committed: null, released: ["gone-1"] });
    expect(ran).toBe(false);

    // A claim that throws is rolled back alone: its write is undone, the run's end is not.
    const broken = ride("live", async (db) => {
      await db.run({ text: "UPDATE cairn_runs SET status = 'running', executor_id = 'live' WHERE id = 'queued-1'" }, []);
      throw new Error("claim broke");
    });
    await finish("gone-2");
    expect(((await broken).failed as Error).message).toBe("claim broke");
    expect((await store.getRun("queued-1"))?.status).toBe("enqueued");

    // A registered id: the run is dispatched in the commit, recorded, and comes back with its row.
    const taken = ride("live", (db, now) => queues.dispatchWithin(db, "live", now, 30_000));
    await finish("gone-3");
    const { committed, released } = await taken;
    const run = await store.getRun("queued-1");
    expect(run).toMatchObject({ status: "running", executorId: "live" });
    // `complete`: the pass did what the ordinary pass after the release would (the executor skips that one).
    expect(committed).toEqual({
      decisions: [{ queue: "q", runId: "queued-1", executorId: "live", loaded: { run, hasSteps: false } }],
      more: false,
      complete: true,
      nextWakeAt: null,
    });
    expect(released).toEqual(["gone-3"]);
    const [row] = (await store.query("SELECT dispatched_at, executor_id, policy FROM cairn_queue_runs WHERE run_id = $1", ["queued-1"])).rows;
    expect(row).toMatchObject({ dispatched_at: t + 1, executor_id: "live", policy: "fifo" });
  });

  // PostgreSQL: dispatchers of a queue take turns on its advisory lock; one that finds it held
  // does not wait behind it (the holder passes again after every wake-up), and decides once it is free.
  it.skipIf(backend.name !== "postgres")("a dispatch that finds the queue's lock held returns at once, deciding nothing", async () => {
    const { db, store, queues, t } = await queuedRunAndLivePeer();
    const holder = new pg.Client({ connectionString: db });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [QUEUE_LOCK_KEY, "q"]);
      expect((await queues.dispatch("live", t, 30_000))?.decisions).toEqual([]);
      expect((await store.getRun("queued-1"))?.status).toBe("enqueued");
      await holder.query("COMMIT");
      expect((await queues.dispatch("live", t, 30_000))?.decisions).toMatchObject([{ queue: "q", runId: "queued-1", executorId: "live" }]);
    } finally {
      await holder.end();
    }
  });
});

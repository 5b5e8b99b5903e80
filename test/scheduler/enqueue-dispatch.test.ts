import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { type Clock, InvalidSpecError, systemClock } from "../../src/index.js";
import { ENQUEUE_HOLDER_KEY, QUEUE_LOCK_KEY } from "../../src/scheduler/dispatch-sql.js";
import { Queues } from "../../src/scheduler/queues.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * An enqueue into an executor with a free slot: the run is dispatched and runs with no poll (the
 * poll interval is a minute), and its decision is recorded like any other. On PostgreSQL the
 * enqueue decides its own run in its own transaction (src/scheduler/enqueue-function.ts): the one
 * wake-up is the one naming the executor it went to, and the decision carries the enqueue's time.
 */
describe.each(BACKENDS)("dispatch at enqueue on $name", (backend) => {
  const env = cairnFactory(backend);

  async function declare(db: string, launch: boolean) {
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 1 });
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => ctx.step("send", async () => `sent to ${input.to}`));
    if (launch) await cairn.launch();
    else await cairn.query("SELECT 1"); // migrated
    return { cairn, send };
  }

  /**
   * Every payload on `cairn_wake` while `body` runs, and a little after (PostgreSQL; none on
   * SQLite); a payload on one of `others` (an executor's own channel) comes as `<channel> <payload>`.
   */
  async function wakesDuring(db: string, body: () => Promise<void>, others: string[] = []): Promise<string[]> {
    if (backend.name !== "postgres") {
      await body();
      return [];
    }
    const listener = new pg.Client({ connectionString: db });
    await listener.connect();
    const payloads: string[] = [];
    listener.on("notification", (n) => payloads.push(n.channel === "cairn_wake" ? (n.payload ?? "") : `${n.channel} ${n.payload ?? ""}`));
    for (const channel of ["cairn_wake", ...others]) await listener.query(`LISTEN ${channel}`);
    try {
      await body();
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      await listener.end();
    }
    return payloads;
  }

  it("gives the run to a live executor at once, and records the decision", async () => {
    const db = await backend.freshDatabase();
    // The executor's own process enqueues: on SQLite that is what signals it without a poll (a
    // producer in another process is heard at the next poll); on PostgreSQL the enqueue's NOTIFY does.
    const executor = await declare(db, true);
    const producer = executor;
    const { rows: executors } = await executor.cairn.query(
      "SELECT e.id, e.backend_pid, eq.wake_channel FROM cairn_executors e JOIN cairn_executor_queues eq ON eq.executor_id = e.id",
    );
    const executorId = String(executors[0]!.id);
    // PostgreSQL: the executor hears its own dispatches on its session's channel; SQLite has none.
    const channel = backend.name === "postgres" ? `cairn_wake_${String(executors[0]!.backend_pid)}` : null;
    expect(executors[0]!.wake_channel ?? null).toBe(channel);

    let handle: Awaited<ReturnType<typeof producer.send.enqueue>> | undefined;
    const wakes = await wakesDuring(
      db,
      async () => {
        handle = await producer.send.enqueue("mail", { to: "ada@example.com" }, { id: "mail-1" });
        expect(await handle.result()).toBe("sent to ada@example.com");
      },
      channel === null ? [] : [channel],
    );
    const { rows } = await executor.cairn.query(
      "SELECT executor_id, policy, dispatched_at - enqueued_at AS waited FROM cairn_queue_runs WHERE run_id = 'mail-1'",
    );
    expect(rows[0]).toMatchObject({ executor_id: executorId, policy: "fifo" });
    if (backend.name === "postgres") {
      // Decided by the enqueue itself: one wake-up, naming the executor, on its own channel (no
      // other executor is woken); no dispatch pass asked of anyone.
      expect(wakes.filter((w) => /^(\S+ )?(queue|dispatched):/.test(w))).toEqual([`${channel} dispatched:${executorId}`]);
      expect(Number(rows[0]!.waited)).toBe(0);
    }
  });

  it("runs the stored functions under generic plans (PostgreSQL: no planning of the dispatch statement per call)", async () => {
    if (backend.name !== "postgres") return; // SQLite has no stored functions: the statements are prepared once in-process
    const db = await backend.freshDatabase();
    const executor = await declare(db, true);
    const handle = await executor.send.enqueue("mail", { to: "bo@example.com" }, { id: "mail-generic" });
    expect(await handle.result()).toBe("sent to bo@example.com");
    const { rows } = await executor.cairn.query(
      "SELECT proname, proconfig FROM pg_proc WHERE proname LIKE 'cairn\\_dispatch\\_%' OR proname LIKE 'cairn\\_enqueue\\_%' ORDER BY proname",
    );
    expect(rows.map((row) => String(row.proname).replace(/_[0-9a-f]{16}$/, ""))).toEqual(["cairn_dispatch", "cairn_enqueue"]);
    for (const row of rows) expect(row.proconfig).toEqual(["plan_cache_mode=force_generic_plan", "enable_seqscan=off"]);
  });

  it.skipIf(backend.name !== "postgres")("keeps the decision's plan on the indexes when a session first planned it on tables never analyzed", async () => {
    // PL/pgSQL keeps one plan per statement for the session, made at its first call: in a new
    // database, with tables the planner takes for a row or two. That plan read the queue's live
    // runs as a scan of cairn_runs per dispatched Task row, for the session's life.
    const db = await backend.freshDatabase();
    const executor = await declare(db, true);
    const seed = await executor.send.enqueue("mail", { to: "seed" }, { id: "seed" }); // creates the function
    await seed.result();
    const session = new pg.Client({ connectionString: db });
    await session.connect();
    try {
      const { rows: fns } = await session.query("SELECT proname FROM pg_proc WHERE proname LIKE 'cairn\\_enqueue\\_%'");
      const { rows: executors } = await session.query("SELECT id, app_version FROM cairn_executors");
      // The enqueue function's call as the store sends it ($1..$20: the run, its Task row, the oldest live heartbeat, the policy).
      const call = `SELECT ${String(fns[0]!.proname)}(${Array.from({ length: 20 }, (_, i) => `$${i + 1}`).join(", ")})`;
      const enqueue = (id: string) => {
        const now = Date.now();
        const run = [id, "send", "enqueued", JSON.stringify({ to: id }), null, null, id, executors[0]!.app_version, null, null, now, null, null];
        const task = ["mail", null, 0, null, null];
        return session.query(call, [...run, ...task, now - 15_000, "fifo"]);
      };
      // Which plan the planner guesses for tables never analyzed hangs on their rows' widths: with
      // one column more on the Task table (a later migration's, or an operator's own) it took the
      // scan per row; with today's columns it happens not to.
      await session.query("ALTER TABLE cairn_queue_runs ADD COLUMN operator_note text");
      await enqueue("first"); // this session's plan, made now: two runs in the tables, never analyzed
      // Its one slot free again before "second" comes (workerConcurrency 1).
      expect(await executor.cairn.run("first").result()).toBe("sent to first");
      await session.query(
        `INSERT INTO cairn_runs (id, workflow, status, input, root_id, app_version, created_at, updated_at)
         SELECT 'old-' || g, 'send', 'succeeded', '{}', 'old-' || g, $1, 0, 0 FROM generate_series(1, 2000) g`,
        [executors[0]!.app_version],
      );
      await session.query(
        `INSERT INTO cairn_queue_runs (run_id, queue, enqueued_at, dispatched_at, executor_id, policy)
         SELECT 'old-' || g, 'mail', 0, 1, $1, 'fifo' FROM generate_series(1, 2000) g`,
        [executors[0]!.id],
      );
      await session.query("BEGIN");
      await enqueue("second");
      const { rows: scans } = await session.query("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'cairn_runs'");
      await session.query("COMMIT");
      expect(Number(scans[0]?.seq_scan ?? 0)).toBeLessThan(10); // one per dispatched run (2,000) before
      // Dispatched all the same: at the enqueue, or by the executor's next pass when the enqueue met
      // the queue's lock held by the pass that followed "first"'s end.
      await eventually(async () => {
        const { rows } = await session.query("SELECT executor_id FROM cairn_queue_runs WHERE run_id = 'second'");
        return rows[0]?.executor_id === executors[0]!.id;
      });
    } finally {
      await session.end();
    }
  });

  it.skipIf(backend.name !== "postgres")("reads a decision's waiting runs off the queue's index, not every run in the database", async () => {
    const db = await backend.freshDatabase();
    const executor = await declare(db, true);
    const session = new pg.Client({ connectionString: db });
    await session.connect();
    try {
      const { rows: executors } = await session.query("SELECT id, app_version FROM cairn_executors");
      // 2,000 runs queued from plain SQL, as the README shows (no NOTIFY: the executor, polling
      // once a minute, leaves them be), and statistics that know of them.
      await session.query(
        `INSERT INTO cairn_runs (id, workflow, status, input, root_id, app_version, created_at, updated_at)
         SELECT 'queued-' || g, 'send', 'enqueued', '{"to":"x"}', 'queued-' || g, $1, g, g FROM generate_series(1, 2000) g`,
        [executors[0]!.app_version],
      );
      await session.query(
        `INSERT INTO cairn_queue_runs (run_id, queue, priority, enqueued_at) SELECT 'queued-' || g, 'mail', 0, g FROM generate_series(1, 2000) g`,
      );
      await session.query("ANALYZE cairn_runs; ANALYZE cairn_queue_runs");
      const { rows: fns } = await session.query("SELECT proname FROM pg_proc WHERE proname LIKE 'cairn\\_dispatch\\_%'");
      const now = Date.now();
      await session.query("BEGIN");
      const { rows: decided } = await session.query(`SELECT * FROM ${String(fns[0]!.proname)}($1, $2, $3, $4, $5, $6)`, [
        "mail",
        now,
        executors[0]!.id,
        now - 15_000,
        "fifo",
        100,
      ]);
      const { rows: reads } = await session.query("SELECT seq_tup_read + idx_tup_fetch AS n FROM pg_stat_xact_user_tables WHERE relname = 'cairn_runs'");
      await session.query("ROLLBACK");
      expect(decided.map((row) => row.run_id)).toEqual(["queued-1"]); // the oldest, to the one free slot
      expect(Number(reads[0]!.n)).toBeLessThan(500); // every run in the database (2,000) before
    } finally {
      await session.end();
    }
  });

  it("leaves the run queued for the executors when none can take it now", async () => {
    const db = await backend.freshDatabase();
    const producer = await declare(db, false);
    const wakes = await wakesDuring(db, async () => {
      await producer.send.enqueue("mail", { to: "bob@example.com" }, { id: "mail-2" });
      await producer.send.enqueue("mail", { to: "cy@example.com" }, { id: "mail-3", delayMs: 50 });
    });
    const { rows } = await producer.cairn.query("SELECT run_id, dispatched_at FROM cairn_queue_runs ORDER BY run_id");
    expect(rows.map((r) => r.dispatched_at)).toEqual([null, null]);
    if (backend.name === "postgres") expect(wakes).toEqual(["queue:mail", "queue:mail"]);

    // An executor that comes later takes both (the delayed one at its time).
    const executor = await declare(db, true);
    await eventually(async () => {
      const { rows: done } = await executor.cairn.query("SELECT COUNT(*) AS n FROM cairn_runs WHERE status = 'succeeded'");
      return Number(done[0]!.n) === 2;
    });
  });

  // The enqueue and the decision are stamped by different clocks (here a producer's 5 s ahead; in
  // CI, one process's clock read by a pass before an enqueue committed): the record never says a
  // run was taken before it was queued.
  it("records no dispatch before the enqueue, whatever the clocks", async () => {
    const db = await backend.freshDatabase();
    const ahead: Clock = { ...systemClock, now: () => Date.now() + 5_000 };
    const producer = env.cairn(db, { pollIntervalMs: 60_000, clock: ahead });
    producer.queue("mail", { workerConcurrency: 1 });
    const send = producer.workflow("send", async (ctx, input: { to: string }) => ctx.step("send", async () => `sent to ${input.to}`));
    await send.enqueue("mail", { to: "ada" }, { id: "mail-skewed" });
    const executor = await declare(db, true);
    expect(await executor.cairn.run("mail-skewed").result()).toBe("sent to ada");
    const { rows } = await executor.cairn.query("SELECT enqueued_at, dispatched_at FROM cairn_queue_runs WHERE run_id = 'mail-skewed'");
    expect(Number(rows[0]!.dispatched_at)).toBeGreaterThanOrEqual(Number(rows[0]!.enqueued_at));
  });

  // SQLite: the dispatch that rides a run's end (Store.claimOnRelease) stands in for the pass the
  // release used to ask for: a drain of a queue through one slot makes no pass per run.
  it.skipIf(backend.name !== "sqlite")("makes no dispatch pass after a release whose commit dispatched the queue", async () => {
    const db = await backend.freshDatabase();
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 1 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => {
      if (input.to === "first") await ctx.step("wait", () => gate);
      return ctx.step("send", () => `sent to ${input.to}`);
    });
    await cairn.launch();
    const handles = [await send.enqueue("mail", { to: "first" }, { id: "slot-0" })];
    for (let i = 1; i < 12; i++) handles.push(await send.enqueue("mail", { to: `r${i}` }, { id: `slot-${i}` }));
    // Everything queued behind the held slot; from here on, only releases dispatch. The passes the
    // enqueues asked for are over once none came for 100 ms (a fixed wait could end before them
    // on a loaded machine); only those after count.
    const passes = vi.spyOn(Queues.prototype, "dispatch");
    try {
      for (let seen = -1; seen !== passes.mock.calls.length;) {
        seen = passes.mock.calls.length;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      passes.mockClear();
      release();
      for (const [i, handle] of handles.entries()) expect(await handle.result()).toBe(`sent to ${i === 0 ? "first" : `r${i}`}`);
      // 12 releases, each of which asked for a pass before; now only a stray poke may make one.
      expect(passes.mock.calls.length).toBeLessThanOrEqual(2);
    } finally {
      passes.mockRestore();
    }
  });

  // SQLite decides a user policy's pick and takes it in separate statements: a run that is not a
  // candidate is refused, naming the policy, and nothing of that pass is kept. (PostgreSQL takes
  // the pick in the deciding statement, which finds no such run to take: nothing is decided.)
  it.skipIf(backend.name !== "sqlite")("refuses a user policy's pick that is not a candidate, and dispatches nothing", async () => {
    const db = await backend.freshDatabase();
    const errors: unknown[] = [];
    const cairn = env.cairn(db, { pollIntervalMs: 60_000, onError: (error) => errors.push(error) });
    cairn.queue("mail", { policy: { sql: "SELECT 'no-such-run' AS run_id, executor_id FROM candidates" } });
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => ctx.step("send", () => input.to));
    await cairn.launch();
    await send.enqueue("mail", { to: "ada" }, { id: "mail-stray" });
    await eventually(() => errors.length > 0);
    expect(errors[0]).toBeInstanceOf(InvalidSpecError);
    expect(String((errors[0] as Error).message)).toContain("returned run no-such-run, which is not a candidate");
    const { rows } = await cairn.query(
      "SELECT r.status, t.dispatched_at FROM cairn_runs r JOIN cairn_queue_runs t ON t.run_id = r.id WHERE r.id = 'mail-stray'",
    );
    expect(rows[0]).toMatchObject({ status: "enqueued", dispatched_at: null });
  });

  // On PostgreSQL, a run enqueued while no other is ready is decided from the candidates built from
  // its parameters before it is written (dispatch-sql.ts, `incoming`): the queue's limits hold there
  // as in any pass. Each run here is enqueued into a queue with nothing else ready (the one held
  // back is cancelled before the next), so every decision is taken that way.
  it("keeps the queue's limits when it decides at enqueue: partition, global concurrency, rate", async () => {
    const db = await backend.freshDatabase();
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { concurrency: 2, partitionBy: { concurrency: 1 }, rateLimit: { limit: 3, periodMs: 60_000 } });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const send = cairn.workflow("send", async (ctx, input: { to: string; hold?: boolean }) => {
      if (input.hold === true) await ctx.step("wait", () => gate);
      return input.to;
    });
    await cairn.launch();
    const dispatched = async (id: string) => {
      const { rows } = await cairn.query("SELECT dispatched_at, policy FROM cairn_queue_runs WHERE run_id = $1", [id]);
      return rows[0]!.dispatched_at !== null && rows[0]!.policy !== "cancelled";
    };
    const heldBack = async (id: string) => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await dispatched(id)).toBe(false);
      await cairn.cancel(id);
    };

    const a1 = await send.enqueue("mail", { to: "a1", hold: true }, { id: "a1", partitionKey: "a" });
    await eventually(() => dispatched("a1"));
    await send.enqueue("mail", { to: "a2" }, { id: "a2", partitionKey: "a" });
    await heldBack("a2"); // its partition's one slot is taken
    const b1 = await send.enqueue("mail", { to: "b1", hold: true }, { id: "b1", partitionKey: "b" });
    await eventually(() => dispatched("b1"));
    await send.enqueue("mail", { to: "c1" }, { id: "c1", partitionKey: "c" });
    await heldBack("c1"); // the queue's two slots are taken
    release();
    expect([await a1.result(), await b1.result()]).toEqual(["a1", "b1"]);
    const d1 = await send.enqueue("mail", { to: "d1" }, { id: "d1", partitionKey: "d" });
    expect(await d1.result()).toBe("d1"); // the third dispatch of the minute
    await send.enqueue("mail", { to: "e1" }, { id: "e1", partitionKey: "e" });
    await heldBack("e1"); // the fourth would exceed the rate limit
  });

  // An enqueue that tried the queue's lock and held it is trusted by any dispatcher that found it
  // held: even when its own run was there already (same id), it says that runs are still ready.
  it.skipIf(backend.name !== "postgres")("wakes the executors when an enqueue of an existing run held the queue's lock", async () => {
    const db = await backend.freshDatabase();
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 1 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => {
      if (input.to === "first") await ctx.step("wait", () => gate);
      return input.to;
    });
    await cairn.launch();
    const first = await send.enqueue("mail", { to: "first" }, { id: "held-1" });
    const second = await send.enqueue("mail", { to: "second" }, { id: "held-2" }); // ready, waiting for the slot
    // The passes this enqueue woke are over: the next enqueue finds the queue's lock free.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const wakes = await wakesDuring(db, async () => {
      await send.enqueue("mail", { to: "second" }, { id: "held-2" });
    });
    expect(wakes).toContain("queue:mail");
    release();
    expect([await first.result(), await second.result()]).toEqual(["first", "second"]);
  });

  // A dispatcher whose pass finds the queue's lock held returns at once; the holder — here a
  // transaction standing in for another producer's enqueue (which takes the holder key first),
  // between its last look and its commit — never sees the run enqueued meanwhile, whose wake-up
  // bounced off the same lock. The bounced pass comes back shortly, not at the next poll (a minute here).
  it.skipIf(backend.name !== "postgres")("passes again soon after its pass found the queue's lock held", async () => {
    const db = await backend.freshDatabase();
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 2 });
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => ctx.step("send", () => input.to));
    await cairn.launch();
    const holder = new pg.Client({ connectionString: db });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1, hashtext('mail'))", [ENQUEUE_HOLDER_KEY]);
      await holder.query("SELECT pg_advisory_xact_lock($1, hashtext('mail'))", [QUEUE_LOCK_KEY]);
      const handle = await send.enqueue("mail", { to: "ada" }, { id: "bounced" });
      await new Promise((resolve) => setTimeout(resolve, 150));
      const { rows } = await cairn.query("SELECT dispatched_at FROM cairn_queue_runs WHERE run_id = 'bounced'");
      expect(rows[0]!.dispatched_at).toBeNull(); // the lock is held: nobody could decide it
      await holder.query("COMMIT"); // no wake-up from the holder
      const started = Date.now();
      expect(await handle.result()).toBe("ada");
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await holder.end();
    }
  });

  it("respects the executor's limit: a second run waits for the first to finish", async () => {
    const db = await backend.freshDatabase();
    const cairn = env.cairn(db, { pollIntervalMs: 60_000 });
    cairn.queue("mail", { workerConcurrency: 1 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const starts: string[] = [];
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => {
      starts.push(input.to);
      if (input.to === "first") await ctx.step("wait", () => gate);
      return input.to;
    });
    await cairn.launch();
    const first = await send.enqueue("mail", { to: "first" }, { id: "mail-a" });
    await eventually(() => starts.includes("first"));
    const second = await send.enqueue("mail", { to: "second" }, { id: "mail-b" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(starts).toEqual(["first"]);
    const { rows } = await cairn.query("SELECT dispatched_at FROM cairn_queue_runs WHERE run_id = 'mail-b'");
    expect(rows[0]!.dispatched_at).toBeNull();
    release();
    expect(await first.result()).toBe("first");
    expect(await second.result()).toBe("second");
  });

  it("runs each run once while reads of assigned runs overlap the passes (stale rows of runs letting go)", async () => {
    // A read of the runs dispatched to an executor cannot tell its own run from one it is letting
    // go of (the finish in flight): loading such a row ran a run's body twice. Passes every 3 ms
    // overlap the reads that wake-ups ask for, and a producer in another Cairn keeps enqueueing.
    const db = await backend.freshDatabase();
    const bodies = new Map<number, number>();
    const executor = env.cairn(db, { pollIntervalMs: 3, maxConcurrentRuns: 16 });
    executor.queue("q");
    executor.workflow("w", async (_ctx, input: { i: number }) => {
      bodies.set(input.i, (bodies.get(input.i) ?? 0) + 1);
      return input.i;
    });
    await executor.launch();
    const producer = env.cairn(db, { pollIntervalMs: 60_000 });
    producer.queue("q");
    const w = producer.workflow("w", async (_ctx, input: { i: number }) => input.i);
    const handles = [];
    for (let batch = 0; batch < 30; batch++) {
      handles.push(...(await Promise.all(Array.from({ length: 10 }, (_, k) => w.enqueue("q", { i: batch * 10 + k }, { id: `r${batch * 10 + k}` })))));
    }
    expect(await Promise.all(handles.map((h) => h.result()))).toHaveLength(300);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect([...bodies].filter(([, n]) => n > 1)).toEqual([]);
    expect(bodies.size).toBe(300);
  });
});

import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { POSTGRES } from "../../src/store/dialect.js";
import { anyClaimable, PARKER_FIRST } from "../../src/store/statements.js";
import { HELD_BY_QUEUES, QUEUES_EXTENSION } from "../../src/scheduler/schema/queues-extension.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * Queued runs are the queues' (`cairn_runs.held_by`, NewRun.heldBy): the core claim neither takes
 * them nor reads them, however many wait — while a run enqueued from plain SQL without the mark is
 * still left to its queue (`holdsRuns`), and a run started with `start()` is still the core's.
 */
describe.each(BACKENDS)("runs held by the queues on $name", (backend) => {
  const env = cairnFactory(backend);

  /** Writes `statements` in one transaction, from outside Cairn (another language would). */
  async function writeFromOutside(db: string, statements: string[]): Promise<void> {
    if (backend.name === "sqlite") {
      const raw = new Database(db);
      raw.transaction(() => statements.forEach((sql) => raw.exec(sql)))();
      raw.close();
      return;
    }
    const client = new pg.Client({ connectionString: db });
    await client.connect();
    try {
      await client.query("BEGIN");
      for (const sql of statements) await client.query(sql);
      await client.query("COMMIT");
    } finally {
      await client.end();
    }
  }

  /** A Cairn that runs "send" and declares queue "emails"; `serving`: whether its executor serves the queue. */
  function cairnOn(db: string, serving: boolean) {
    const cairn = env.cairn(db, { pollIntervalMs: 30, ...(serving ? {} : { serve: { queues: [] } }) });
    cairn.queue("emails", { concurrency: 1 });
    const send = cairn.workflow("send", async (ctx, input: { to: string }) => ctx.step("send", async () => `sent to ${input.to}`));
    return { cairn, send };
  }

  async function runsById(cairn: ReturnType<typeof cairnOn>["cairn"]) {
    const { rows } = await cairn.query("SELECT id, status, held_by FROM cairn_runs ORDER BY id");
    return Object.fromEntries(rows.map((row) => [String(row.id), `${String(row.status)} ${String(row.held_by)}`]));
  }

  it("leaves queued runs to their queue, marked or not, and claims started ones", async () => {
    const db = await env.database();
    const { cairn, send } = cairnOn(db, false); // runs "send", serves no queue: only the core claim could take a queued run
    await cairn.launch();
    await send.enqueue("emails", { to: "ada" }, { id: "queued" });
    await writeFromOutside(db, [
      `INSERT INTO cairn_runs (id, workflow, status, input, root_id, app_version, created_at, updated_at)
       VALUES ('from-sql', 'send', 'enqueued', '{"to":"bo"}', 'from-sql', 'default', 1, 1)`,
      `INSERT INTO cairn_queue_runs (run_id, queue, priority, enqueued_at) VALUES ('from-sql', 'emails', 0, 1)`,
    ]);
    expect(await (await send.start({ to: "cy" }, { id: "started" })).result()).toBe("sent to cy");
    await new Promise((resolve) => setTimeout(resolve, 200)); // several polls, each a claim pass
    expect(await runsById(cairn)).toEqual({
      "from-sql": "enqueued null", // held by the queues' predicate alone
      queued: `enqueued ${HELD_BY_QUEUES}`,
      started: "succeeded null",
    });

    const executor = cairnOn(db, true); // one that serves the queue dispatches both
    await executor.cairn.launch();
    expect(await executor.cairn.run("queued").result()).toBe("sent to ada");
    expect(await executor.cairn.run("from-sql").result()).toBe("sent to bo");
  });

  it("holds a resumed queued run again, in its queue", async () => {
    const db = await env.database();
    const { cairn, send } = cairnOn(db, false);
    await cairn.launch();
    await send.enqueue("emails", { to: "ada" }, { id: "queued" });
    await cairn.cancel("queued");
    expect(await cairn.resume("queued")).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await runsById(cairn)).toEqual({ queued: `enqueued ${HELD_BY_QUEUES}` });
    const { rows } = await cairn.query("SELECT dispatched_at FROM cairn_queue_runs WHERE run_id = 'queued'");
    expect(rows[0]!.dispatched_at).toBeNull();

    const executor = cairnOn(db, true);
    await executor.cairn.launch();
    expect(await executor.cairn.run("queued").result()).toBe("sent to ada");
  });

  it("does not strand a run whose Task row was left behind by a run deleted by hand", async () => {
    const db = await env.database();
    const { cairn, send } = cairnOn(db, true);
    await cairn.launch();
    expect(await (await send.enqueue("emails", { to: "ada" }, { id: "again" })).result()).toBe("sent to ada");
    // Not retention (which takes the Task row along): an operator's DELETE of the run alone.
    await writeFromOutside(db, ["DELETE FROM cairn_steps WHERE run_id = 'again'", "DELETE FROM cairn_runs WHERE id = 'again'"]);
    // Enqueued again under that id, not dispatched in the same call (a delayed start): its Task row
    // is the stale one, dispatched long ago, so only the core claim can run it — unmarked, it does.
    const handle = await send.enqueue("emails", { to: "bo" }, { id: "again", delayMs: 50 });
    expect(await handle.result()).toBe("sent to bo");
  });

  it.skipIf(backend.name !== "postgres")("looks for claimable runs without reading the queued ones", async () => {
    const db = await env.database();
    const { cairn, send } = cairnOn(db, false);
    await cairn.launch();
    await send.enqueue("emails", { to: "ada" }, { id: "queued" });
    const session = new pg.Client({ connectionString: db });
    await session.connect();
    try {
      // 2,000 more, as the enqueue writes them, and statistics that know of them.
      await session.query(
        `INSERT INTO cairn_runs (id, workflow, status, input, root_id, app_version, created_at, updated_at, held_by)
         SELECT 'q-' || g, 'send', 'enqueued', '{"to":"x"}', 'q-' || g, 'default', g, g, $1 FROM generate_series(1, 2000) g`,
        [HELD_BY_QUEUES],
      );
      await session.query(
        `INSERT INTO cairn_queue_runs (run_id, queue, priority, enqueued_at) SELECT 'q-' || g, 'emails', 0, g FROM generate_series(1, 2000) g`,
      );
      await session.query("ANALYZE cairn_runs; ANALYZE cairn_queue_runs");
      // The claim's look (postgres-store.ts, claimRuns), as this executor sends it.
      const look = anyClaimable(POSTGRES, [String(QUEUES_EXTENSION.hooks.holdsRuns)], false, PARKER_FIRST);
      const { rows: executors } = await session.query("SELECT id, wake_channel FROM cairn_executors");
      await session.query("BEGIN");
      const { rows } = await session.query(`SELECT $1::text IS NOT NULL AND $5::int > 0 AND (${look}) AS any`, [
        executors[0]!.id,
        "default",
        Date.now(),
        "[]",
        100,
        ["send"],
        executors[0]!.wake_channel,
      ]);
      const { rows: reads } = await session.query("SELECT seq_tup_read + idx_tup_fetch AS n FROM pg_stat_xact_user_tables WHERE relname = 'cairn_runs'");
      await session.query("ROLLBACK");
      expect(rows[0]!.any).toBe(false);
      expect(Number(reads[0]!.n)).toBeLessThan(50); // every queued run, each with a look into its Task row, before
    } finally {
      await session.end();
    }
    await eventually(async () => (await runsById(cairn))["queued"] === `enqueued ${HELD_BY_QUEUES}`);
  });
});

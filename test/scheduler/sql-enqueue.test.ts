import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/** The statements the README gives other languages for enqueueing (section "Queues"), verbatim. */
const ENQUEUE_SQL = [
  `INSERT INTO cairn_runs (id, workflow, status, input, root_id, app_version, created_at, updated_at)
   VALUES ('sql-1', 'send', 'enqueued', '{"to":"ada@example.com"}', 'sql-1', 'default', 1767225600000, 1767225600000)`,
  `INSERT INTO cairn_queue_runs (run_id, queue, partition_key, priority, enqueued_at)
   VALUES ('sql-1', 'emails', 'tenant-7', 0, 1767225600000)`,
];

describe.each(BACKENDS)("enqueueing from plain SQL on $name", (backend) => {
  const env = cairnFactory(backend);

  it("an INSERT of the run and its queue row, in one transaction, is picked up and dispatched", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 30 });
    cairn.queue("emails", { concurrency: 1 });
    cairn.workflow("send", async (ctx, input: { to: string }) => ctx.step("send", async () => `sent to ${input.to}`));
    await cairn.query("SELECT 1"); // migrated
    if (backend.name === "sqlite") {
      const raw = new Database(db);
      raw.transaction(() => ENQUEUE_SQL.forEach((sql) => raw.exec(sql)))();
      raw.close();
    } else {
      const client = new pg.Client({ connectionString: db });
      await client.connect();
      await client.query("BEGIN");
      for (const sql of ENQUEUE_SQL) await client.query(sql);
      await client.query("COMMIT");
      await client.end();
    }
    await cairn.launch();
    expect(await cairn.run("sql-1").result()).toBe("sent to ada@example.com");
    const { rows } = await cairn.query("SELECT policy, executor_id IS NOT NULL AS taken FROM cairn_queue_runs WHERE run_id = 'sql-1'");
    expect(rows[0]!.policy).toBe("fifo");
  });
});

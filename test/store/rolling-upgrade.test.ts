import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { AGENTS_EXTENSION } from "../../src/ai/schema/agents-extension.js";
import { TELEMETRY_EXTENSION } from "../../src/observe/telemetry/telemetry-extension.js";
import { CRON_EXTENSION } from "../../src/scheduler/cron/cron-extension.js";
import { QUEUES_EXTENSION } from "../../src/scheduler/schema/queues-extension.js";
import { POSTGRES, SQLITE } from "../../src/store/dialect.js";
import { CORE_MIGRATIONS } from "../../src/store/migrations.js";
import { EXECUTOR_COLUMNS, RUN_COLUMNS, STEP_COLUMNS } from "../../src/store/statements.js";
import { SUPERVISION_EXTENSION } from "../../src/supervision/schema.js";
import { UI_EXTENSION } from "../../src/ui/schema.js";
import { isStaleStatementError, isTransientStoreError } from "../../src/store/store-errors.js";
import { BACKENDS, type Backend } from "../backends.js";
import { cairnFactory } from "../harness.js";

/**
 * A rolling upgrade: a newer Cairn's migration adds columns to the tables while this version's
 * executors run, their statements already prepared. Nothing the running executor does may fail
 * for it — before, on PostgreSQL, every statement reading `cairn_runs.*` failed with 0A000 "cached
 * plan must not change result type": a user's `start()` threw, claims failed, and a held session
 * would have refused its statement for good.
 */
describe.each(BACKENDS)("a newer version's migration under a running executor on $name", (backend) => {
  const env = cairnFactory(backend);

  it("starts, steps, sleeps, messages, children, events and queues go on with no error", async () => {
    const db = await env.database();
    const errors: unknown[] = [];
    const cairn = env.cairn(db, { pollIntervalMs: 30, onError: (error) => errors.push(error) });
    cairn.queue("mail", { concurrency: 2 });
    const double = cairn.workflow("double", async (ctx, n: number) => ctx.step("double", () => n * 2));
    const flow = cairn.workflow("flow", async (ctx, n: number) => {
      const one = await ctx.step("one", () => n + 1);
      await ctx.sleep("nap", 20);
      const child = await ctx.child(double, one, { id: `child-${n}` });
      const doubled = await child.result();
      await ctx.setEvent("doubled", doubled);
      const extra = (await ctx.recv<number>("extra", { timeoutMs: 10_000 })) ?? 0;
      return doubled + extra;
    });
    await cairn.launch();

    /** Every kind of statement the executor and a client prepare, once through. */
    async function round(n: number): Promise<void> {
      const run = await flow.start(n, { id: `flow-${n}` });
      expect(await cairn.getEvent(run.id, "doubled", { timeoutMs: 10_000 })).toBe((n + 1) * 2);
      await cairn.send(run.id, "extra", 1);
      expect(await run.result()).toBe((n + 1) * 2 + 1);
      const queued = await double.enqueue("mail", n, { id: `mail-${n}` });
      expect(await queued.result()).toBe(n * 2);
      expect(await cairn.run(`child-${n}`).status()).toMatchObject({ status: "succeeded" });
      const { rows } = await cairn.query("SELECT count(*) AS n FROM cairn_steps WHERE run_id = $1", [run.id]);
      expect(Number(rows[0]!.n)).toBeGreaterThan(3);
    }

    for (let n = 0; n < 3; n++) await round(n);
    await addColumnToEveryTable(backend, db);
    for (let n = 10; n < 16; n++) await round(n);
    expect(errors).toEqual([]);
  });

  it("reads, by name, every column its tables have", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    await cairn.launch();
    expect(await columns(backend, db, "cairn_runs")).toEqual([...RUN_COLUMNS].sort());
    expect(await columns(backend, db, "cairn_steps")).toEqual([...STEP_COLUMNS].sort());
    expect(await columns(backend, db, "cairn_executors")).toEqual([...EXECUTOR_COLUMNS].sort());
  });
});

describe("what a migration may do, so that the executors of the version before keep working", () => {
  const layers = [
    { name: "core", migrations: CORE_MIGRATIONS },
    AGENTS_EXTENSION,
    TELEMETRY_EXTENSION,
    CRON_EXTENSION,
    QUEUES_EXTENSION,
    SUPERVISION_EXTENSION,
    UI_EXTENSION,
  ];

  it("adds tables, indexes, and columns an older executor's inserts may leave out; it drops, renames, retypes and constrains nothing", () => {
    const statements = layers.flatMap((layer) =>
      layer.migrations.flatMap((migration) =>
        migration.statements.flatMap((statement) =>
          [POSTGRES, SQLITE].map((dialect) => ({
            where: `${layer.name} migration ${migration.version} (${dialect.name})`,
            sql: (typeof statement === "string" ? statement : statement(dialect)).replace(/\s+/g, " "),
          })),
        ),
      ),
    );
    expect(statements.length).toBeGreaterThan(20);
    for (const { where, sql } of statements) {
      expect(sql, where).not.toMatch(/\b(DROP|RENAME|ALTER COLUMN|ADD CONSTRAINT|SET NOT NULL|TRUNCATE)\b/i);
      // A column an older version does not know is left out of its inserts: it must take NULL or a default.
      for (const added of sql.matchAll(/ADD COLUMN ([^,;]*)/gi)) {
        if (/NOT NULL/i.test(added[1]!)) expect(added[1], where).toMatch(/DEFAULT/i);
      }
    }
  });
});

// PostgreSQL only: SQLite prepares a statement again by itself when its table changes.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("a statement of a layer's that reads `*` (PostgreSQL)", () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  it("fails once as transient when its table grows, and its session is dropped, so the next call prepares it afresh", async () => {
    const url = await postgres!.freshDatabase();
    const store = new PostgresStore(url);
    closing.push(() => store.close());
    await store.migrate();
    const star = { name: "test_every_run_column", text: "SELECT * FROM cairn_runs WHERE id = $1" };
    // On the layers' held session (store.execute), where a statement's own error keeps the session.
    expect(await store.execute(star, ["none"])).toEqual([]);
    await addColumnToEveryTable(postgres!, url);
    const failure = await store.execute(star, ["none"]).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isStaleStatementError(failure)).toBe(true);
    expect(isTransientStoreError(failure)).toBe(true);
    expect(await store.execute(star, ["none"])).toEqual([]);
    expect(await store.execute(star, ["none"])).toEqual([]);
  });
});

/** What a newer version's migration does, from another connection: a column more on every Cairn table. */
async function addColumnToEveryTable(backend: Backend, db: string): Promise<void> {
  if (backend.name === "sqlite") {
    const raw = new Database(db);
    try {
      const tables = raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'cairn\\_%' ESCAPE '\\'").pluck().all() as string[];
      expect(tables).toContain("cairn_runs");
      for (const table of tables) raw.exec(`ALTER TABLE ${table} ADD COLUMN added_by_a_newer_version INTEGER`);
    } finally {
      raw.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: db });
  await client.connect();
  try {
    // Tables and partitioned tables, not their partitions (a partition takes its parent's columns).
    const { rows } = await client.query<{ relname: string }>(
      `SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace
         AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname LIKE 'cairn\\_%'`,
    );
    expect(rows.map((row) => row.relname)).toContain("cairn_runs");
    for (const { relname } of rows) await client.query(`ALTER TABLE ${relname} ADD COLUMN added_by_a_newer_version integer`);
  } finally {
    await client.end();
  }
}

async function columns(backend: Backend, db: string, table: string): Promise<string[]> {
  if (backend.name === "sqlite") {
    const raw = new Database(db, { readonly: true });
    try {
      return (raw.prepare(`SELECT name FROM pragma_table_info('${table}')`).pluck().all() as string[]).sort();
    } finally {
      raw.close();
    }
  }
  const client = new pg.Client({ connectionString: db });
  await client.connect();
  try {
    const { rows } = await client.query<{ column_name: string }>(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1",
      [table],
    );
    return rows.map((row) => row.column_name).sort();
  } finally {
    await client.end();
  }
}

import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { CHECK_SQL } from "../../src/engine/journal-checks.js";
import { POSTGRES } from "../../src/store/dialect.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { ANALYZE_LOCK, StatisticsKeeper } from "../../src/store/postgres/statistics-keeper.js";
import { statements } from "../../src/store/statements.js";

// PostgreSQL only: the planner's statistics are PostgreSQL's (SQLite plans by its indexes until
// someone runs ANALYZE, which Cairn does not).
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("plans on tables the planner has no statistics for (PostgreSQL)", () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  /** A migrated database whose tables autovacuum leaves alone, and a session on it. */
  async function database(): Promise<{ url: string; sql: pg.Client; pool: pg.Pool }> {
    const url = await postgres!.freshDatabase();
    const store = new PostgresStore(url);
    await store.migrate();
    await store.close();
    const sql = new pg.Client({ connectionString: url });
    await sql.connect();
    closing.push(() => sql.end());
    const { rows } = await sql.query<{ relname: string }>("SELECT relname FROM pg_class WHERE relname LIKE 'cairn\\_%' AND relkind = 'r'");
    for (const { relname } of rows) await sql.query(`ALTER TABLE ${relname} SET (autovacuum_enabled = false)`);
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    closing.push(() => pool.end());
    return { url, sql, pool };
  }

  /** `rows` journal rows, 10 a run, written so their counts reach the statistics views at once. */
  async function journal(sql: pg.Client, rows: number): Promise<void> {
    // The session reports its counts when it next goes idle (at most once a second, unless forced).
    await sql.query("BEGIN");
    await sql.query("SELECT pg_stat_force_next_flush()");
    await sql.query(
      `INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, started_at, finished_at, attempts)
       SELECT 'old-' || (g / 10), g % 10, 's', 'step', 'succeeded', '1', 0, 0, 1 FROM generate_series(0, $1 - 1) g`,
      [rows],
    );
    await sql.query("COMMIT");
  }

  async function analyzed(sql: pg.Client, table: string): Promise<boolean> {
    const { rows } = await sql.query("SELECT last_analyze IS NOT NULL AS analyzed FROM pg_stat_user_tables WHERE relname = $1", [table]);
    return rows[0]?.analyzed === true;
  }

  /** The generic plan a session keeps for the statement `text` (parameters of `types`), run with the literals `args`. */
  async function genericPlan(sql: pg.Client, text: string, types: string[], args: string[]): Promise<string> {
    await sql.query("SET plan_cache_mode = force_generic_plan");
    await sql.query(`PREPARE kept(${types.join(", ")}) AS ${text}`);
    try {
      const { rows } = await sql.query(`EXPLAIN EXECUTE kept(${args.join(", ")})`);
      return rows.map((row: Record<string, string>) => row["QUERY PLAN"]).join("\n");
    } finally {
      await sql.query("DEALLOCATE kept");
      await sql.query("RESET plan_cache_mode");
    }
  }

  it("analyzes the tables that grew far past their statistics, and leaves the others alone", async () => {
    const { sql, pool } = await database();
    await journal(sql, 2_000);
    const keeper = new StatisticsKeeper(pool);
    expect(await keeper.check()).toEqual(["cairn_steps"]);
    expect(await analyzed(sql, "cairn_steps")).toBe(true);
    expect(await analyzed(sql, "cairn_runs")).toBe(false); // nothing written: its plans stand
    expect(await keeper.check()).toEqual([]); // in step now: nothing to do until it doubles again
  });

  it("lets one keeper of a database analyze at a time", async () => {
    const { url, sql, pool } = await database();
    await journal(sql, 2_000);
    const peer = new pg.Client({ connectionString: url });
    await peer.connect();
    closing.push(() => peer.end());
    await peer.query("SELECT pg_advisory_lock($1)", [ANALYZE_LOCK]); // a peer's keeper, mid-round
    const keeper = new StatisticsKeeper(pool);
    expect(await keeper.check()).toEqual([]);
    expect(await analyzed(sql, "cairn_steps")).toBe(false);
    await peer.query("SELECT pg_advisory_unlock($1)", [ANALYZE_LOCK]);
    expect(await keeper.check()).toEqual(["cairn_steps"]);
  });

  it("starts keeping once an executor registers, and stops when the store closes", async () => {
    const { url, sql } = await database();
    await journal(sql, 2_000);
    const store = new PostgresStore(url);
    closing.push(() => store.close());
    await store.registerExecutor({
      id: "e1",
      hostname: "h",
      pid: 1,
      backendPid: null,
      pidNamespace: null,
      appVersion: "default",
      startedAt: 0,
      heartbeatAt: 0,
      capacity: 1,
    });
    const deadline = Date.now() + 15_000;
    while (!(await analyzed(sql, "cairn_steps")) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await analyzed(sql, "cairn_steps")).toBe(true);
  });

  it("reads several runs' journals by index, whatever plan the session keeps", async () => {
    const { sql } = await database();
    await journal(sql, 200_000);
    const plan = await genericPlan(sql, statements(POSTGRES).journalsIn.text, ["text[]"], ["'{old-5,old-7}'"]);
    expect(plan).not.toMatch(/Seq Scan on cairn_steps/); // hashed the list and scanned every row before
    const { rows } = await sql.query({ text: statements(POSTGRES).journalsIn.text, values: [["old-7", "old-5", "old-7"]] });
    expect(rows.map((row) => `${row.run_id}/${row.seq}`)).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `old-5/${i}`),
      ...Array.from({ length: 10 }, (_, i) => `old-7/${i}`),
    ]);
  });

  it("checks warm runs' journals by index, whatever the statistics", async () => {
    const { sql } = await database();
    await journal(sql, 50_000);
    const checks = JSON.stringify([
      { run: "old-5", top: 7, seqs: [2] },
      { run: "old-9", top: 9, seqs: [] },
    ]);
    const { rows: plan } = await sql.query({ text: `EXPLAIN ${CHECK_SQL.postgres}`, values: [checks] });
    expect(plan.map((row: Record<string, string>) => row["QUERY PLAN"]).join("\n")).not.toMatch(/Seq Scan on cairn_steps/);
    const { rows } = await sql.query({ text: CHECK_SQL.postgres, values: [checks] });
    expect(rows.map((row) => `${row.run_id}/${row.seq}`).sort()).toEqual(["old-5/2", "old-5/8", "old-5/9"]);
  });
});

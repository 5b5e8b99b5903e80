import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS, type Backend } from "../backends.js";
import { cli, expectOk, expectOneLineError } from "../cli/cli.js";
import { cairnFactory } from "../harness.js";
import { scratchDir } from "../scratch.js";

/** A database with one finished run. */
async function populated(env: ReturnType<typeof cairnFactory>): Promise<string> {
  const database = await env.database();
  const cairn = env.cairn(database);
  const hello = cairn.workflow("hello", async (ctx) => ctx.step("greet", () => "hi"));
  await cairn.launch();
  await (await hello.start(undefined, { id: "r1" })).result();
  await cairn.shutdown();
  return database;
}

const sql = (database: string, query: string, ...rest: string[]) => cli(["sql", query, "--database", database, ...rest]);

/** The CLI with room for a large output (the shared helper keeps execFile's 1 MB default). */
function bigCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const main = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { ...process.env, CAIRN_DATABASE: undefined, NO_COLOR: "1" }, maxBuffer: 512 * 1024 * 1024, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }),
    );
  });
}

describe.each(BACKENDS)("cairn sql on $name", (backend: Backend) => {
  const env = cairnFactory(backend);

  it("reads, and refuses writes, several statements and empty queries by the same rules on both backends", async () => {
    const database = await populated(env);
    const ok = await sql(database, "SELECT id, status FROM cairn_runs", "--json");
    expectOk(ok);
    expect(JSON.parse(ok.stdout)).toEqual([{ id: "r1", status: "succeeded" }]);
    expectOneLineError(await sql(database, ""), /the query is empty/);
    expectOneLineError(await sql(database, "   "), /the query is empty/);
    expectOneLineError(await sql(database, "DELETE FROM cairn_runs"), /refused: cairn sql only reads/);
    expectOneLineError(await sql(database, "UPDATE cairn_runs SET status = 'failed'"), /refused: cairn sql only reads/);
    expectOneLineError(await sql(database, "DROP TABLE cairn_steps"), /refused: cairn sql only reads/);
    expectOneLineError(await sql(database, "CREATE TABLE evil (x int)"), /refused: cairn sql only reads/);
    expectOneLineError(await sql(database, "SELECT 1; DELETE FROM cairn_runs"), /one statement at a time/);
    expectOneLineError(await sql(database, "SELECT 1; SELECT 2"), /one statement at a time/);
    expectOneLineError(await sql(database, "SELEC 1"), /SQL error/);
    expectOneLineError(await sql(database, "SELECT 1", "--timeout", "0"), /--timeout must be an integer ≥ 1/);
    expectOneLineError(await sql(database, "SELECT 1", "--timeout", "soon"), /--timeout must be an integer/);
    const after = await sql(database, "SELECT count(*) AS n FROM cairn_runs", "--json");
    expect(Number((JSON.parse(after.stdout) as { n: number }[])[0]!.n)).toBe(1);
  });

  it("stops a query at the timeout on both backends", async () => {
    const database = await populated(env);
    const runaway =
      backend.name === "postgres" ? "SELECT pg_sleep(30)" : "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c";
    const started = Date.now();
    expectOneLineError(await sql(database, runaway, "--timeout", "400"), /ran past its 400 ms timeout/);
    expect(Date.now() - started).toBeLessThan(10_000);
    // A recursive CTE that never ends, on PostgreSQL too.
    const cte = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    expectOneLineError(await sql(database, cte, "--timeout", "400"), /timeout/);
  });

  it("prints 140,000 rows without crashing, as a table and as JSON", async () => {
    const database = await populated(env);
    const series =
      backend.name === "postgres"
        ? "SELECT g AS n, 'row ' || g AS label FROM generate_series(1, 140000) g"
        : "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 140000) SELECT n, 'row ' || n AS label FROM c";
    const started = Date.now();
    const table = await bigCli(["sql", series, "--database", database, "--timeout", "20000"]);
    console.log(`cairn sql, 140,000 rows on ${backend.name}: ${Date.now() - started} ms`);
    expectOk(table);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(140_002);
    expect(lines[lines.length - 1]).toBe("(140000 rows)");
    const json = await bigCli(["sql", series, "--database", database, "--timeout", "20000", "--json"]);
    expectOk(json);
    expect((JSON.parse(json.stdout) as unknown[]).length).toBe(140_000);
  });
});

const postgresUrl = process.env.CAIRN_TEST_POSTGRES_URL;

describe.skipIf(postgresUrl === undefined)("cairn sql on postgres: what the database refuses", () => {
  const env = cairnFactory(BACKENDS.find((b) => b.name === "postgres")!);

  it("refuses COPY, PROGRAM, file reads, signals, role changes and advisory locks, and leaves nothing behind", async () => {
    const database = await populated(env);
    const marker = join(scratchDir("cairn-sql-"), "pwned");
    const cases: [string, RegExp][] = [
      [`COPY (SELECT 1) TO PROGRAM 'touch ${marker}'`, /refused: .*pg_execute_server_program/],
      [`COPY (SELECT 1) TO '${marker}'`, /refused: .*pg_write_server_files/],
      ["COPY (SELECT id FROM cairn_runs) TO STDOUT", /refused: .*COPY is not a query/],
      ["COPY cairn_runs FROM STDIN", /refused: cairn sql only reads/],
      ["SELECT pg_read_file('/etc/passwd')", /refused: .*permission denied for function pg_read_file/],
      ["SELECT pg_ls_dir('.')", /refused: .*permission denied/],
      ["SELECT lo_import('/etc/passwd')", /refused: .*permission denied/],
      ["SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()", /refused: cairn sql only reads/],
      ["SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()", /refused: cairn sql only reads/],
      ["SELECT set_config('role', 'postgres', false)", /refused: .*permission denied to set role/],
      ["SELECT set_config('session_authorization', 'postgres', false)", /refused: .*permission denied/],
      [`SELECT pg_advisory_lock(${0x636169726e})`, /refused: .*the statement took an advisory lock/],
      ["SELECT pg_advisory_xact_lock(7)", /refused: .*the statement took an advisory lock/],
      ["SELECT * FROM pg_authid", /refused: .*permission denied/],
      ["CREATE TEMP TABLE t (x int)", /refused: cairn sql only reads/],
    ];
    for (const [query, expected] of cases) expectOneLineError(await sql(database, query), expected);
    expect(existsSync(marker)).toBe(false);
    // A statement_timeout switched off inside the query does not outlive the armed timer.
    expectOneLineError(await sql(database, "SELECT set_config('statement_timeout', '0', false), pg_sleep(5)", "--timeout", "300"), /timeout/);

    const admin = new pg.Client({ connectionString: database });
    await admin.connect();
    try {
      // Nobody holds Cairn's migration lock, and the reader is a plain role.
      const lock = await admin.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${0x636169726e}) AS ok`);
      expect(lock.rows[0]!.ok).toBe(true);
      const role = await admin.query<{ rolsuper: boolean; members: number }>(
        `SELECT rolsuper, (SELECT count(*)::int FROM pg_auth_members WHERE member = r.oid) AS members FROM pg_roles r WHERE rolname = 'cairn_sql_reader'`,
      );
      expect(role.rows[0]).toEqual({ rolsuper: false, members: 0 });
      const sessions = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = 'cairn_sql_reader'");
      expect(sessions.rows[0]!.n).toBe(0);
    } finally {
      await admin.end();
    }
  });
});

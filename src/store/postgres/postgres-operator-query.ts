import { createHmac } from "node:crypto";
import pg from "pg";
import type { QueryConfig } from "pg";
import { CairnError, TimeoutError } from "../../errors.js";
import type { OperatorQueryOptions, QueryResult } from "../store.js";
import { emptyQuery, OperatorQueryRefusedError, severalStatements, validTimeoutMs } from "../operator-query.js";

/**
 * `cairn sql` on PostgreSQL: an operator's query, refused by the database — not by string checks —
 * everything but reading Cairn's tables.
 *
 * The query runs on its own connection that *logs in as* `cairn_sql_reader`: a role with LOGIN, no
 * superuser, no CREATEROLE/CREATEDB/REPLICATION/BYPASSRLS, NOINHERIT, member of no role, with
 * SELECT on the `cairn_*` tables and views of this database and nothing else. Logging in as it
 * (rather than `SET ROLE` on the owner's session) matters: a session whose *session user* is a
 * superuser can undo `SET ROLE` from inside the query with `set_config('role', ...)` or
 * `set_config('session_authorization', ...)`; the reader's session user is the reader.
 *
 * Which mechanism refuses what:
 * - `COPY ... TO PROGRAM`, `COPY ... TO/FROM '<file>'`: the reader is not in
 *   pg_execute_server_program / pg_write_server_files / pg_read_server_files (SQLSTATE 42501).
 *   `COPY ... FROM`: the transaction is READ ONLY (25006). `COPY ... TO STDOUT`: the server's
 *   command tag for the statement is COPY, and the result is refused.
 * - `pg_read_file`, `pg_ls_dir`, `lo_import`...: EXECUTE is not granted to PUBLIC (42501).
 * - `pg_terminate_backend`, `pg_cancel_backend`: the reader may signal only its own role's sessions
 *   and is in no role and not in pg_signal_backend (42501).
 * - `set_config('role'|'session_authorization', ...)`: the session user is the reader (42501); any
 *   other setting dies with the connection, which is closed after every query.
 * - writes of any kind: READ ONLY transaction (25006), and no INSERT/UPDATE/DELETE grant (42501).
 * - several statements (`SELECT 1; DROP ...`): the extended query protocol takes exactly one (42601).
 * - `pg_sleep(30)`, a runaway recursive CTE: `statement_timeout` (57014), and `lock_timeout` bounds
 *   any wait for a lock; a client-side timer closes the connection should the server not answer.
 * - `pg_advisory_lock`, `pg_advisory_xact_lock`: PostgreSQL grants them to everyone, so after the
 *   statement the session's `pg_locks` are read and a query that took any advisory lock is refused
 *   (its rows are not returned); the lock itself is released at once by the rollback and by closing
 *   the connection, so it never outlives the query (it could have blocked Cairn's migration lock for
 *   at most the timeout).
 *
 * Setup is migration-free and idempotent: the first `cairn sql` creates the role (when the URL's user
 * may create roles) and grants what is missing (when it owns the tables). Its password is derived
 * from the URL's password with HMAC-SHA256, so only someone who holds the owner's password can log
 * in as the reader with password authentication; with no password in the URL the reader gets none
 * (it can then log in only where pg_hba.conf trusts it).
 */
export const SQL_READER_ROLE = "cairn_sql_reader";

export async function postgresOperatorQuery(
  ownerPool: pg.Pool,
  url: string,
  types: pg.CustomTypesConfig,
  sql: string,
  options: OperatorQueryOptions,
): Promise<QueryResult> {
  if (sql.trim() === "") throw emptyQuery();
  const timeoutMs = validTimeoutMs(options.timeoutMs);
  const schema = await ensureReader(ownerPool, url);
  const client = new pg.Client({
    connectionString: readerUrl(url),
    types,
    application_name: "cairn sql",
    connectionTimeoutMillis: Math.max(timeoutMs, 5000),
    options: [
      "-c default_transaction_read_only=on",
      `-c statement_timeout=${timeoutMs}`,
      `-c lock_timeout=${timeoutMs}`,
      `-c idle_in_transaction_session_timeout=${timeoutMs + 5000}`,
      ...(/^[a-z_][a-z0-9_]*$/.test(schema) ? [`-c search_path=${schema}`] : []),
    ].join(" "),
  });
  client.on("error", () => undefined);
  try {
    await client.connect();
  } catch (error) {
    throw readerLoginFailure(error);
  }
  let timer: NodeJS.Timeout | undefined;
  // The server's statement_timeout ends the query; this only guards against a server that does not answer.
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut(timeoutMs)), timeoutMs + 2000);
  });
  try {
    return await Promise.race([readOnly(client, sql), guard]);
  } catch (error) {
    const code = sqlState(error);
    if (code === "57014") throw timedOut(timeoutMs);
    if (code === "25006" || code === "42501") {
      throw new OperatorQueryRefusedError(`the database said: ${(error as Error).message}`, "change runs with cairn cancel/resume/fork/send");
    }
    if (code === "42601" && /multiple commands/i.test((error as Error).message)) throw severalStatements();
    throw error;
  } finally {
    clearTimeout(timer);
    // Closing the connection drops whatever the query set for its session (settings, advisory locks).
    await Promise.race([client.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  }
}

async function readOnly(client: pg.Client, sql: string): Promise<QueryResult> {
  await client.query("BEGIN READ ONLY");
  try {
    const result = await client.query<Record<string, unknown>>({ text: sql, queryMode: "extended" } as QueryConfig);
    if (result.command === "COPY") {
      // COPY ... TO STDOUT reads only what SELECT could, but its rows travel outside the result.
      throw new OperatorQueryRefusedError("COPY is not a query", "use SELECT (and --json for machine-readable rows)");
    }
    const locks = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()");
    if ((locks.rows[0]?.n ?? 0) > 0) {
      throw new OperatorQueryRefusedError("the statement took an advisory lock", "advisory locks are Cairn's (its migration lock): leave them be");
    }
    return { columns: (result.fields ?? []).map((f) => f.name), rows: result.rows ?? [] };
  } finally {
    await client.query("ROLLBACK").catch(() => undefined);
  }
}

/**
 * Creates the reader role if missing and grants it SELECT on every `cairn_*` relation of the
 * current schema it cannot yet read. Reads first, so the steady state writes nothing to the catalog.
 * Returns the schema the reader should search.
 */
async function ensureReader(pool: pg.Pool, url: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await setUpReader(pool, url);
    } catch (error) {
      // Two `cairn sql` at once may race to create the role or to grant: the loser looks again.
      const raced = ["23505", "42710", "XX000", "40001", "40P01"].includes(sqlState(error) ?? "");
      if (!raced || attempt >= 3) throw error;
    }
  }
}

async function setUpReader(pool: pg.Pool, url: string): Promise<string> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN READ WRITE");
    const role = await client.query<{ rolsuper: boolean; elevated: boolean; memberships: string[] }>(
      `SELECT r.rolsuper, (r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls) AS elevated,
              ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid)::text[] AS memberships
       FROM pg_roles r WHERE r.rolname = $1`,
      [SQL_READER_ROLE],
    );
    const existing = role.rows[0];
    if (existing === undefined) {
      const password = readerPassword(url);
      await setupStatement(
        client,
        `CREATE ROLE ${SQL_READER_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT
         CONNECTION LIMIT 32 PASSWORD ${password === null ? "NULL" : literal(password)}`,
      );
    } else if (existing.rolsuper || existing.elevated || existing.memberships.length > 0) {
      throw new OperatorQueryRefusedError(
        `the role ${SQL_READER_ROLE} has more than SELECT on Cairn's tables (${existing.rolsuper ? "superuser" : existing.memberships.join(", ") || "CREATEROLE/CREATEDB/REPLICATION/BYPASSRLS"})`,
        `cairn sql runs as that role; make it plain again (ALTER ROLE ${SQL_READER_ROLE} NOSUPERUSER NOCREATEROLE NOCREATEDB NOREPLICATION NOBYPASSRLS; REVOKE <role> FROM ${SQL_READER_ROLE})`,
      );
    }
    const schema = (await client.query<{ s: string }>("SELECT current_schema() AS s")).rows[0]!.s;
    const missing = await client.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p') AND c.relname LIKE 'cairn\\_%'
         AND NOT has_table_privilege($1, c.oid, 'SELECT')`,
      [SQL_READER_ROLE],
    );
    const canConnect = await client.query<{ ok: boolean }>(
      "SELECT has_database_privilege($1, current_database(), 'CONNECT') AND has_schema_privilege($1, current_schema(), 'USAGE') AS ok",
      [SQL_READER_ROLE],
    );
    if (!canConnect.rows[0]!.ok) {
      const database = (await client.query<{ d: string }>("SELECT current_database() AS d")).rows[0]!.d;
      await setupStatement(client, `GRANT CONNECT ON DATABASE ${identifier(database)} TO ${SQL_READER_ROLE}`);
      await setupStatement(client, `GRANT USAGE ON SCHEMA ${identifier(schema)} TO ${SQL_READER_ROLE}`);
    }
    for (const { name } of missing.rows) {
      await setupStatement(client, `GRANT SELECT ON ${identifier(schema)}.${identifier(name)} TO ${SQL_READER_ROLE}`);
    }
    await client.query("COMMIT");
    return schema;
  } catch (error) {
    await client.query("ROLLBACK").catch((rollbackError: unknown) => (broken = rollbackError as Error));
    throw error;
  } finally {
    client.release(broken);
  }
}

async function setupStatement(client: pg.PoolClient, text: string): Promise<void> {
  try {
    await client.query(text);
  } catch (error) {
    if (sqlState(error) !== "42501") throw error;
    throw new OperatorQueryRefusedError(
      `cannot set up the role ${SQL_READER_ROLE} that cairn sql runs as (${(error as Error).message})`,
      `run once as an administrator: CREATE ROLE ${SQL_READER_ROLE} LOGIN NOINHERIT; GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${SQL_READER_ROLE}; ` +
        `or run cairn sql once with a URL whose user owns Cairn's tables and may create roles`,
    );
  }
}

function readerPassword(url: string): string | null {
  let password = "";
  try {
    password = decodeURIComponent(new URL(url).password);
  } catch {
    password = "";
  }
  if (password === "") return null;
  return createHmac("sha256", password).update(SQL_READER_ROLE).digest("hex");
}

function readerUrl(url: string): string {
  const parsed = new URL(url);
  const password = readerPassword(url);
  parsed.username = SQL_READER_ROLE;
  parsed.password = password ?? "";
  return parsed.toString();
}

function readerLoginFailure(error: unknown): Error {
  const code = sqlState(error);
  if (code === "28P01" || code === "28000") {
    return new OperatorQueryRefusedError(
      `cannot log in as ${SQL_READER_ROLE}, the role cairn sql runs as (${(error as Error).message})`,
      `allow it in pg_hba.conf, or give it the password cairn derives from the URL's (drop the role and run cairn sql again as its owner)`,
    );
  }
  return error instanceof Error ? error : new CairnError(String(error));
}

function timedOut(timeoutMs: number): TimeoutError {
  return new TimeoutError(`the query ran past its ${timeoutMs} ms timeout and was cancelled — narrow it, or pass --timeout <ms>`);
}

function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

function identifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
